# Build-time facts that `accel env` reports without loading anything at run time.
# The git revision is refreshed on every build (not only at configure time), and the header is
# rewritten only when it changes, so an unchanged tree rebuilds nothing.
set(ACCEL_REVISION_HEADER ${PROJECT_BINARY_DIR}/generated/accel_git_revision.h)
add_custom_target(accel_git_revision
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${ACCEL_REVISION_HEADER}
          -P ${PROJECT_SOURCE_DIR}/cmake/write_revision.cmake
  BYPRODUCTS ${ACCEL_REVISION_HEADER}
  COMMENT "Reading the git revision")
