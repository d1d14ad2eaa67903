#!/usr/bin/env bash
# Writes this worker's environment and arguments to $OUT_DIR/rank_$RANK.{env,args}.
env | sort >"$OUT_DIR/rank_$RANK.env"
printf '%s\n' "$@" >"$OUT_DIR/rank_$RANK.args"
