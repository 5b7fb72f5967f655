# Opens tinygrad's default device (its queues: the emulator's engine threads start) and prints
# each thread of the process with its nice value and scheduling policy: "emulator NAME N P" for
# the emulator's threads, "program NAME N P" for the others.
import os
from tinygrad import Device

Device[Device.DEFAULT].synchronize()
for tid in sorted(os.listdir("/proc/self/task"), key=int):
  name = open(f"/proc/self/task/{tid}/comm").read().strip()
  # Field 19 of stat is the nice value; the name before it may hold spaces, so count after ")".
  nice = int(open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()[16])
  policy = os.sched_getscheduler(int(tid))
  kind = "emulator" if name.startswith(("hcq-emu-", "rdna3-", "hcq-exec-")) else "program"
  print(kind, name.replace(" ", "_"), nice, policy)
