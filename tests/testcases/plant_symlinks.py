# Plants symlinks in the (host-backed) workspace that point out of it, for a
# later sandbox setup to trip over. argv[1] is a host directory outside the
# workspace (absolute), argv[2] the same directory relative to the
# workspace ("../..."). Creates: evil_abs -> argv[1], evil_rel -> argv[2],
# and real/evil -> argv[1] inside a real directory.
import os
import sys

outside_abs, outside_rel = sys.argv[1:3]
os.symlink(outside_abs, "/workspace/evil_abs")
os.symlink(outside_rel, "/workspace/evil_rel")
os.mkdir("/workspace/real")
os.symlink(outside_abs, "/workspace/real/evil")
print("planted")
