# Allocates and touches memory in 8 MiB steps until something stops it.
chunks = []
while True:
    chunks.append(bytearray(8 << 20))
