#pragma once
// Forwarding header: accel::Error is public API, in accel/error.h. Kept only for the files
// other changes of issue 12 are reworking (libaccel/store/, launcher/, tests/store/); once they
// are merged, switch them to "accel/error.h" and delete this file.
#include "accel/error.h"
