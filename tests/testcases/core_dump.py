# Reports its core-dump limit, then crashes with SIGABRT in the working
# directory (where a core file would be written).
import os
import resource

print("RLIMIT_CORE:", resource.getrlimit(resource.RLIMIT_CORE), flush=True)
os.abort()
