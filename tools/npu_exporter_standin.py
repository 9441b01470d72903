#!/usr/bin/env python3
"""Write a STAND-IN for Huawei's npu-exporter (MindCluster NPU Exporter) for the
accelerator_exporter tests: the real binary reads the NPUs through the driver's DCMI
library and cannot run here.  This one takes its startup parameters (-ip=, -port=,
-logFile=, Go's flag syntax) and serves, on http://ip:port/metrics, the series of the
documented Metrics interface for one chip (made-up values, labels id and model_name),
and writes a line to its log file.  It refuses a flag it does not implement, starts
only with -ip and -port given, and, as the real one cannot read the NPUs otherwise, only as
root or as a member of the group HwHiAiUser.

  npu_exporter_standin.py DEST   # writes DEST/npu-exporter, prints its sha256
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

EXPORTER = r'''#!/usr/bin/python3
# STAND-IN for Huawei's npu-exporter (vllm-fleet tests): no NPU; made-up values.
import http.server, os, sys
# The startup parameters this stand-in implements (the real one has more); as Go's flag
# package does, anything else is refused.  No defaults for -ip and -port: the real
# default port is the fleet's own, so a dropped flag would pass unseen.
KNOWN = ("ip", "port", "updateTime", "logFile", "logLevel")
flags, args = {}, sys.argv[1:]
while args:
    name, equals, value = args.pop(0).lstrip("-").partition("=")
    if name not in KNOWN:
        sys.exit("flag provided but not defined: -%s" % name)
    if not equals and not args:
        sys.exit("flag needs an argument: -%s" % name)
    flags[name] = value if equals else args.pop(0)
missing = [name for name in ("ip", "port") if not flags.get(name)]
if missing:
    sys.exit("STAND-IN npu-exporter: give %s" % ", ".join("-" + name for name in missing))
# The real one reads the NPUs through the driver's DCMI interface, which is open to the
# group HwHiAiUser (Huawei runs the binary as its own user in that group); without it,
# nothing can be read.  The stand-in refuses to start the same way.
try:
    import grp
    allowed = os.getuid() == 0 or grp.getgrnam("HwHiAiUser").gr_gid in os.getgroups()
except KeyError:
    allowed = False
if not allowed:
    sys.exit("STAND-IN npu-exporter: dcmi init failed: this user is not in the group HwHiAiUser")
labels = 'id="0",model_name="Ascend910B3",vdie_id="STANDIN",pcie_bus_info="0000:C1:00.0"'
series = [("machine_npu_nums", "Amount of npu installed on the machine.", None, 1),
          ("npu_chip_info_health_status", "the npu health status", labels, 1),
          ("npu_chip_info_error_code", "the npu error code", labels, 0),
          ("npu_chip_info_temperature", "the npu temperature", labels, 46),
          ("npu_chip_info_power", "the npu power", labels, 73.9),
          ("npu_chip_info_utilization", "the ai core utilization", labels, 0),
          ("npu_chip_info_hbm_used_memory", "the npu hbm used memory", labels, 2048),
          ("npu_chip_info_hbm_total_memory", "the npu hbm total memory", labels, 65536)]
body = "".join("# HELP %s %s\n# TYPE %s gauge\n%s%s %s\n" % (n, h, n, n, "{%s}" % l if l else "", v)
               for n, h, l, v in series).encode()
if flags.get("logFile"):
    with open(flags["logFile"], "a") as log:
        log.write("npu-exporter STAND-IN listening on %s:%s\n" % (flags["ip"], flags["port"]))
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/metrics" else 404)
        self.end_headers()
        self.wfile.write(body if self.path == "/metrics" else b"")
    def log_message(self, *a):
        pass
http.server.HTTPServer((flags["ip"], int(flags["port"])), Handler).serve_forever()
'''


def main() -> None:
    dest = Path(sys.argv[1])
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "npu-exporter"
    path.write_text(EXPORTER)
    print(hashlib.sha256(path.read_bytes()).hexdigest())


if __name__ == "__main__":
    main()
