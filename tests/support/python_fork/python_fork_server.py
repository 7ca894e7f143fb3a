# The Python oracles' fork server: one interpreter imports torch, torchvision and numpy once, then forks a child per
# request that runs the requested script or -c code as a fresh `python` would (the client is python_fork.cpp).
#
# Usage: python_fork_server.py NAME IDLE_SECONDS. It listens on the abstract Unix socket NAME (bound before the
# imports, so that a second server started for the same name exits at once) and exits after IDLE_SECONDS with no
# request and no child running.
#
# A request is one message: the client's stdin, stdout and stderr as SCM_RIGHTS descriptors, then a length-prefixed
# block of NUL-separated fields: mode ("c" or "file"), target (code or script path), flags ("u", "B"), the current
# directory, the argument count, the arguments, then the environment as KEY=VALUE. The server answers "pid N\n" once
# the child runs and "exit STATUS\n" (a waitpid status) when it ends. Later bytes from the client are signal numbers,
# sent on to the child; the client going away (killed) kills the child's process group.
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import time


def recv_request(conn):
    msg, fds, _, _ = socket.recv_fds(conn, 4, 3)
    while len(msg) < 4:
        more = conn.recv(4 - len(msg))
        if not more:
            raise EOFError("the client closed before its request")
        msg += more
    (size,) = struct.unpack("<I", msg)
    body = b""
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise EOFError("the client closed inside its request")
        body += more
    fields = body.decode("utf-8", "surrogateescape").split("\0")
    mode, target, flags, cwd, argc = fields[0], fields[1], fields[2], fields[3], int(fields[4])
    args = fields[5:5 + argc]
    env = dict(kv.split("=", 1) for kv in fields[5 + argc:] if "=" in kv)
    return fds, mode, target, flags, cwd, args, env


def reset_random_state():
    # A fresh interpreter seeds random, numpy and torch's default generator from the OS.
    if "random" in sys.modules:
        sys.modules["random"].seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.seed()


def run_child(fds, mode, target, flags, cwd, args, env):
    """In the forked child: becomes the requested `python` run and never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setpgid(0, 0)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        if "u" in flags:
            sys.stdout.reconfigure(write_through=True)
            sys.stderr.reconfigure(write_through=True)
        elif os.isatty(1):
            sys.stdout.reconfigure(line_buffering=True)
        sys.dont_write_bytecode = "B" in flags
        reset_random_state()
        if mode == "c":
            sys.argv = ["-c"] + args
            sys.path[0] = ""
            main = type(sys)("__main__")
            main.__dict__["__builtins__"] = __builtins__
            sys.modules["__main__"] = main
            exec(compile(target, "<string>", "exec"), main.__dict__)
        else:
            sys.argv = [target] + args
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
        code = 0
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        kind, value, tb = sys.exc_info()
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__, "<frozen runpy>"):
            tb = tb.tb_next  # the traceback a fresh interpreter prints starts in the script
        sys.excepthook(kind, value.with_traceback(tb), tb)
        code = 1
    finally:
        try:
            import atexit
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


def serve(srv, idle_s):
    sel = selectors.DefaultSelector()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel.register(srv, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "reap")
    child_of = {}  # client connection -> child pid
    conn_of = {}  # child pid -> client connection
    last_busy = time.monotonic()
    while True:
        if not child_of and time.monotonic() - last_busy > idle_s:
            return
        for key, _ in sel.select(timeout=1.0):
            if key.data == "accept":
                conn, _ = srv.accept()
                conn.setblocking(True)
                try:
                    request = recv_request(conn)
                except (OSError, EOFError, ValueError, IndexError):
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    srv.close()
                    for c in child_of:
                        c.close()
                    conn.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    run_child(*request)
                for fd in request[0]:
                    os.close(fd)
                child_of[conn] = pid
                conn_of[pid] = conn
                try:
                    conn.sendall(b"pid %d\n" % pid)
                except OSError:
                    pass
                sel.register(conn, selectors.EVENT_READ, "client")
            elif key.data == "reap":
                os.read(wake_r, 4096)
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    conn = conn_of.pop(pid, None)
                    if conn is not None:
                        del child_of[conn]
                        sel.unregister(conn)
                        try:
                            conn.sendall(b"exit %d\n" % status)
                        except OSError:
                            pass
                        conn.close()
            else:
                conn = key.fileobj
                try:
                    data = conn.recv(64)
                except OSError:
                    data = b""
                pid = child_of.get(conn)
                if pid is None:
                    continue
                if not data:  # the client is gone: so is its run
                    for kill in (os.killpg, os.kill):
                        try:
                            kill(pid, signal.SIGKILL)
                        except OSError:
                            pass
                    continue
                for sig in data:
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
            last_busy = time.monotonic()


def main():
    name, idle_s = sys.argv[1], float(sys.argv[2])
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        srv.bind("\0" + name)
    except OSError:
        return 0  # a server for this name runs already
    srv.listen(128)
    for module in ("numpy", "torch", "torchvision"):
        try:
            __import__(module)
        except ImportError:
            pass
    serve(srv, idle_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
