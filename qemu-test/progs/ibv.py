"""libibverbs through ctypes, for the guest's test programs: the real library and the
provider it loads, no bindings of our own. Import it from a program in this folder (or put
this folder on sys.path first)."""
import ctypes
import sys

ibv = ctypes.CDLL("libibverbs.so.1", use_errno=True)
ibv.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
ibv.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
ibv.ibv_get_device_name.restype = ctypes.c_char_p
ibv.ibv_get_device_name.argtypes = [ctypes.c_void_p]
ibv.ibv_open_device.restype = ctypes.c_void_p
ibv.ibv_open_device.argtypes = [ctypes.c_void_p]
ibv.ibv_close_device.argtypes = [ctypes.c_void_p]
ibv.ibv_alloc_pd.restype = ctypes.c_void_p
ibv.ibv_alloc_pd.argtypes = [ctypes.c_void_p]
ibv.ibv_dealloc_pd.argtypes = [ctypes.c_void_p]
ibv.ibv_free_device_list.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
ibv.ibv_event_type_str.restype = ctypes.c_char_p
ibv.ibv_event_type_str.argtypes = [ctypes.c_int]


def die(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def open_device(name):
    """ibv_open_device() of the device called NAME; dies if there is none."""
    n = ctypes.c_int()
    devs = ibv.ibv_get_device_list(ctypes.byref(n))
    if not devs:
        die(f"ibv_get_device_list: errno {ctypes.get_errno()}")
    ctx = None
    for i in range(n.value):
        if ibv.ibv_get_device_name(devs[i]).decode() == name:
            ctx = ibv.ibv_open_device(devs[i])
            if not ctx:
                die(f"ibv_open_device({name}): errno {ctypes.get_errno()}")
    ibv.ibv_free_device_list(devs)
    if ctx is None:
        die(f"no device {name}")
    return ctx
