# Opens tinygrad's default device (AMD with AMD=1) and runs nothing: the device open alone
# creates the queues a kernel's checks may refuse.
from tinygrad import Device
print(Device[Device.DEFAULT])
