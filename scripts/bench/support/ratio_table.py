"""Prints a hyperfine --export-json result as a table: each command's median, mean ± sd, and its
speed-up against the first command when its name ends in "(reference)" (measured in the same
run), else n/a.

    python3 ratio_table.py RESULT.json [NAME_WIDTH]
"""
import json
import sys

results = json.load(open(sys.argv[1]))["results"]
width = int(sys.argv[2]) if len(sys.argv) > 2 else 40
# The first command is the reference when its name says so; without one there is no ratio.
ref = results[0]["median"] if results[0]["command"].endswith("(reference)") else None
print(f"{'command':{width}} {'median':>10} {'mean ± sd':>20} {'speed-up vs reference':>22}")
for r in results:
    ratio = f"{ref / r['median']:20.1f}x" if ref else f"{'n/a':>21}"
    print(f"{r['command']:{width}} {r['median']*1e3:8.1f}ms {r['mean']*1e3:10.1f} ± {r['stddev']*1e3:5.1f}ms "
          f"{ratio}")
