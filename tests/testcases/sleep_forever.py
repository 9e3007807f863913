# Blocks forever without using CPU.
import threading

threading.Event().wait()
