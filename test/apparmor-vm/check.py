"""The AppArmor profile on a real AppArmor kernel: run as root by the test
VM's init (test/apparmor-vm/run.sh).  Everything is checked from outside
the sandbox, as root and as the unprivileged user tester:

  load     the profile as the package ships it loads (apparmor_parser -r),
           with its child python-sandbox-mcp//unpriv
  jail     the installed binary builds its jail in namespace mode under it
           (--check), and an execute_python call over stdio returns ok
  child    while that server runs, the zygote (pid 1 of its pid namespace)
           and the sessions below it are confined by the child, stacked,
           with CapEff, CapPrm and CapBnd empty
  exec     a program started from the profile (aa-exec -p ... -- unshare
           -Urmun PROG) is stacked with the child: in its own user namespace,
           where unconfined the same program holds every capability, each
           action that needs one fails
  parent   what enters the profile itself gets the namespace but none of
           the capabilities the profile denies (net_admin here)
  userns   whether this kernel mediates user namespace creation (a profile
           without the userns rule is refused one), and whether it has
           kernel.apparmor_restrict_unprivileged_userns

Each line starts with "aavm: "; the last is "aavm: RESULT PASS" or
"aavm: RESULT FAIL".  A control runs each capability action unconfined
first, so a check cannot pass because the action fails anyway."""
import json
import os
import pwd
import select
import subprocess
import sys
import time

BIN = '/usr/bin/python-sandbox-mcp'
PROFILE = 'python-sandbox-mcp'
CHILD = 'python-sandbox-mcp//unpriv'
TEMPLATE = '/usr/share/python-sandbox-mcp/apparmor/python-sandbox-mcp.in'
DEST = '/etc/apparmor.d/python-sandbox-mcp'
SECFS = '/sys/kernel/security/apparmor'
RESTRICT = '/proc/sys/kernel/apparmor_restrict_unprivileged_userns'

results = []


def say(msg):
    for line in str(msg).splitlines() or ['']:
        print('aavm: ' + line, flush=True)


def check(name, ok, detail=''):
    results.append(bool(ok))
    say(('PASS ' if ok else 'FAIL ') + name + (': ' + detail if detail else ''))


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return '<%s>' % e.strerror


def as_user(user, cmd):
    """cmd run as user (root: as is), with a clean environment."""
    pw = pwd.getpwnam(user)
    env = {'PATH': '/usr/sbin:/usr/bin:/sbin:/bin', 'HOME': pw.pw_dir, 'USER': user,
           'LC_ALL': 'C.UTF-8'}
    if user == 'root':
        return cmd, env
    return ['setpriv', '--reuid=%d' % pw.pw_uid, '--regid=%d' % pw.pw_gid,
            '--init-groups', '--'] + cmd, env


def run(user, cmd, timeout=120, cwd=None):
    argv, env = as_user(user, cmd)
    try:
        return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(argv, 124, e.stdout or '', 'timed out after %ss' % timeout)


def label(pid):
    s = read('/proc/%s/attr/apparmor/current' % pid)
    if s.startswith('<'):
        s = read('/proc/%s/attr/current' % pid)
    return s.strip().rstrip('\0')


def caps(pid):
    out = {}
    for line in read('/proc/%s/status' % pid).splitlines():
        k, _, v = line.partition(':')
        if k in ('CapEff', 'CapPrm', 'CapBnd', 'CapInh', 'CapAmb'):
            out[k] = int(v.strip(), 16)
    return out


def nspid(pid):
    for line in read('/proc/%s/status' % pid).splitlines():
        if line.startswith('NSpid:'):
            return [int(x) for x in line.split()[1:]]
    return []


def in_child(lab):
    """The label has the child among its stacked profiles."""
    return CHILD in lab.split(' (')[0].split('//&')


# --- the kernel and the profile ----------------------------------------

def facts():
    say('kernel %s; AppArmor enabled: %s' % (os.uname().release,
        read('/sys/module/apparmor/parameters/enabled').strip()))
    say('lsm: %s' % read('/sys/kernel/security/lsm').strip())
    say(subprocess.run(['apparmor_parser', '--version'], capture_output=True, text=True).stdout.splitlines()[0])
    ns = SECFS + '/features/namespaces'
    if os.path.isdir(ns):
        for f in sorted(os.listdir(ns)):
            say('features/namespaces/%s: %s' % (f, read(os.path.join(ns, f)).strip()))
    else:
        say('features/namespaces: absent')
    sysctls = sorted(f for f in os.listdir('/proc/sys/kernel') if 'userns' in f or f.startswith('apparmor'))
    for f in sysctls:
        say('sysctl kernel.%s = %s' % (f, read('/proc/sys/kernel/' + f).strip()))


def load():
    with open(TEMPLATE) as f:
        text = f.read().replace('@BIN@', BIN)
    with open(DEST, 'w') as f:
        f.write(text)
    r = subprocess.run(['apparmor_parser', '-r', '-W', DEST], capture_output=True, text=True)
    check('load: apparmor_parser -r %s' % DEST, r.returncode == 0, (r.stdout + r.stderr).strip())
    profiles = read(SECFS + '/profiles').splitlines()
    for name in (PROFILE, CHILD):
        check('load: %s is loaded in enforce mode' % name, '%s (enforce)' % name in profiles)
    return r.returncode == 0


# --- the binary under the profile ----------------------------------------

def project(user):
    d = '/srv/aavm/' + user
    os.makedirs(d, exist_ok=True)
    pw = pwd.getpwnam(user)
    os.chown(d, pw.pw_uid, pw.pw_gid)
    return d


def jail_check(user):
    d = project(user)
    r = run(user, [BIN, '--check', '--root', d], cwd=d)
    out = r.stdout + r.stderr
    layers = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0] in ('userns', 'mountns', 'pidns', 'netns', 'caps'):
            layers[parts[0]] = line.strip()
    ok = r.returncode == 0 and 'mode: namespaces' in out and len(layers) == 5 and \
        all(v.split(None, 2)[1] == 'applied' for v in layers.values())
    check('jail[%s]: --check builds every namespace under the profile' % user, ok,
          '' if ok else 'exit %d\n%s' % (r.returncode, out))
    caps_line = layers.get('caps', '')
    check('jail[%s]: --check enters the child' % user,
          'AppArmor %s (no capability)' % CHILD in caps_line, caps_line)


class Server:
    def __init__(self, user):
        d = project(user)
        argv, env = as_user(user, [BIN, '--root', d])
        self.err = open('/tmp/server-%s.err' % user, 'w+')
        self.p = subprocess.Popen(argv, env=env, cwd=d, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err)
        self.buf = b''
        self.next_id = 1

    def send(self, obj):
        self.p.stdin.write((json.dumps(obj) + '\n').encode())
        self.p.stdin.flush()

    def request(self, method, params, timeout=180):
        rid = self.next_id
        self.next_id += 1
        self.send({'jsonrpc': '2.0', 'id': rid, 'method': method, 'params': params})
        end = time.monotonic() + timeout
        while True:
            while b'\n' in self.buf:
                line, self.buf = self.buf.split(b'\n', 1)
                msg = json.loads(line)
                if msg.get('id') == rid:
                    return msg
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError('no reply to %s in %ss' % (method, timeout))
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                if not chunk:
                    raise EOFError('the server closed stdout')
                self.buf += chunk

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def descendants(pid):
    kids = {}
    for d in os.listdir('/proc'):
        if d.isdigit():
            st = read('/proc/%s/stat' % d)
            if st.startswith('<'):
                continue
            ppid = int(st.rsplit(')', 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


CELL = '''
import os
lab = 'unreadable'
try:
    lab = open('/proc/self/attr/current').read().strip()
except OSError as e:
    lab = 'unreadable: %s' % e.strerror
print('cell', 6 * 7, 'uid', os.getuid(), 'label', lab)
'''


def jail_call(user):
    s = Server(user)
    try:
        init = s.request('initialize', {'protocolVersion': '2025-06-18', 'capabilities': {},
                                        'clientInfo': {'name': 'aavm', 'version': '1'}})
        check('jail[%s]: initialize' % user, 'result' in init, json.dumps(init)[:300])
        s.send({'jsonrpc': '2.0', 'method': 'notifications/initialized'})
        r = s.request('tools/call', {'name': 'execute_python', 'arguments': {'code': CELL}})
        res = r.get('result', {})
        text = '\n'.join(c.get('text', '') for c in res.get('content', []) if c.get('type') == 'text')
        ok = 'result' in r and not res.get('isError') and 'cell 42' in text
        check('jail[%s]: execute_python returns ok' % user, ok, text.strip()[:400] if ok else json.dumps(r)[:800])
        # From outside: the server itself in the profile, every process
        # below it in the child with no capability.
        check('child[%s]: the server is confined by %s' % (user, PROFILE),
              label(s.p.pid) == '%s (enforce)' % PROFILE, label(s.p.pid))
        # The zygote is pid 1 of its pid namespace; the sessions are its
        # children.  Between it and the server waits the intermediate (the
        # server's own code, outside the pid namespace: it only waits for
        # the zygote), said as it is.
        below = descendants(s.p.pid)
        zygotes = [p for p in below if nspid(p)[-1:] == [1] and len(nspid(p)) > 1]
        jailed = [p for z in zygotes for p in [z] + descendants(z)]
        check('child[%s]: a zygote and a session below the server' % user,
              len(zygotes) == 1 and len(jailed) >= 2, 'below %s, zygote %s' % (below, zygotes))
        for pid in jailed:
            lab, c = label(pid), caps(pid)
            what = 'zygote' if pid in zygotes else 'session'
            ok = in_child(lab) and c.get('CapEff') == 0 and c.get('CapPrm') == 0 and c.get('CapBnd') == 0
            check('child[%s]: %s %d in the child, no capability, empty bounding set' % (user, what, pid), ok,
                  '%s; %s' % (lab, ' '.join('%s=%x' % kv for kv in sorted(c.items()))))
        for pid in below:
            if pid not in jailed:
                c = caps(pid)
                say('INFO child[%s]: pid %d between server and zygote (the intermediate): %s; %s' % (
                    user, pid, label(pid), ' '.join('%s=%x' % kv for kv in sorted(c.items()))))
    except Exception as e:  # noqa: BLE001 - a failure, said, not a crash
        check('jail[%s]: the server answered' % user, False, '%r\n%s' % (e, s.stderr()[-2000:]))
    finally:
        s.close()


# --- what the profile gives to programs and to itself -------------------

SECRET = '/tmp/aavm-secret'

# Each action needs one capability in the user namespace unshare made.
ACTIONS = [
    ('dac_override: read a file mode 000', 'cat %s' % SECRET),
    ('sys_admin: set the host name of its uts namespace', 'hostname aavm-x'),
    ('sys_admin: mount a tmpfs in its mount namespace', 'mount -t tmpfs none /mnt'),
    ('net_admin: bring lo up in its network namespace', 'ip link set lo up'),
]


def exec_checks(user):
    pw = pwd.getpwnam(user)
    with open(SECRET, 'w') as f:
        f.write('secret\n')
    os.chown(SECRET, pw.pw_uid, pw.pw_gid)
    os.chmod(SECRET, 0)
    for name, action in ACTIONS:
        sh = 'cat /proc/self/attr/current; echo; %s' % action
        base = ['unshare', '-Urmun', 'sh', '-c', sh]
        ctl = run(user, base, timeout=60)
        att = run(user, ['aa-exec', '-p', PROFILE, '--'] + base, timeout=60)
        lab = att.stdout.splitlines()[0] if att.stdout else ''
        check('exec[%s]: control, unconfined unshare -Urmun: %s succeeds' % (user, name),
              ctl.returncode == 0, (ctl.stdout + ctl.stderr).strip()[-300:])
        check('exec[%s]: aa-exec -p %s -- unshare -Urmun sh: %s fails' % (user, PROFILE, name),
              att.returncode != 0 and in_child(lab),
              'exit %d, label %s: %s' % (att.returncode, lab, att.stderr.strip()[-200:]))
    os.unlink(SECRET)


# The profile itself, entered directly: its namespace, and the
# capabilities it denies denied.  python3 makes the namespaces itself
# (os.unshare), so nothing is executed after the profile was entered.
PARENT = r'''
import fcntl, os, socket, struct, sys
uid, gid = os.getuid(), os.getgid()
os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNET | os.CLONE_NEWUTS)
open('/proc/self/setgroups', 'w').write('deny')
open('/proc/self/uid_map', 'w').write('0 %d 1' % uid)
open('/proc/self/gid_map', 'w').write('0 %d 1' % gid)
print('label', open('/proc/self/attr/current').read().strip())
what = sys.argv[1]
try:
    if what == 'net_admin':
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        fl = struct.unpack('16sh', fcntl.ioctl(s, 0x8913, struct.pack('16sh', b'lo', 0))[:18])[1]
        fcntl.ioctl(s, 0x8914, struct.pack('16sh', b'lo', fl | 1))
    elif what == 'sys_admin':
        socket.sethostname('aavm-p')
    print('did', what)
except OSError as e:
    print('refused', what, e.strerror)
    sys.exit(1)
'''


def parent_checks(user):
    for what in ('net_admin', 'sys_admin'):
        ctl = run(user, ['python3', '-c', PARENT, what], timeout=60)
        att = run(user, ['aa-exec', '-p', PROFILE, '--', 'python3', '-c', PARENT, what], timeout=60)
        check('parent[%s]: control, unconfined python3 in its own user namespace: %s succeeds' % (user, what),
              ctl.returncode == 0, (ctl.stdout + ctl.stderr).strip()[-300:])
        out = (att.stdout + att.stderr).strip()[-300:]
        if what == 'net_admin':
            check('parent[%s]: aa-exec -p %s -- python3: the namespace is granted, net_admin refused'
                  % (user, PROFILE), att.returncode == 1 and 'refused net_admin' in att.stdout, out)
        else:
            # What building the jail takes stays with a process that
            # enters the profile itself: said, not hidden.
            say('INFO parent[%s]: aa-exec -p %s -- python3 (entered directly, no exec after): sys_admin in '
                'its own user namespace: %s' % (user, PROFILE, 'granted' if att.returncode == 0 else 'refused')
                + ' (' + out.replace('\n', '; ') + ')')


# --- the kernel's own userns mediation -------------------------------------

NOUSERNS = '''abi <abi/4.0>,
profile aavm-nouserns flags=(attach_disconnected) {
  allow capability,
  allow file rwlkm /{**,},
  allow file ix /**,
  allow network,
  allow unix,
  allow signal,
}
'''


def userns_checks():
    path = '/etc/apparmor.d/aavm-nouserns'
    with open(path, 'w') as f:
        f.write(NOUSERNS)
    r = subprocess.run(['apparmor_parser', '-r', '-W', path], capture_output=True, text=True)
    check('userns: a profile without the userns rule loads', r.returncode == 0, r.stderr.strip())
    for user in ('tester', 'root'):
        no = run(user, ['aa-exec', '-p', 'aavm-nouserns', '--', 'unshare', '-U', 'true'])
        yes = run(user, ['aa-exec', '-p', PROFILE, '--', 'unshare', '-U', 'true'])
        mediated = no.returncode != 0
        say('INFO userns[%s]: under a profile without the userns rule, unshare -U %s (%s)' % (
            user, 'is refused' if mediated else 'succeeds', (no.stderr or 'exit 0').strip()))
        check('userns[%s]: under %s, unshare -U succeeds' % (user, PROFILE), yes.returncode == 0,
              yes.stderr.strip())
        if os.path.isfile(SECFS + '/features/namespaces/userns_create'):
            check('userns[%s]: this kernel mediates userns creation: the profile without the rule is refused'
                  % user, mediated)
    subprocess.run(['apparmor_parser', '-R', path], capture_output=True)
    os.unlink(path)

    if not os.path.exists(RESTRICT):
        say('INFO kernel.apparmor_restrict_unprivileged_userns: absent from kernel %s: the restriction that '
            'makes the profile necessary (an unconfined unprivileged process refused a user namespace, '
            'Ubuntu 23.10 and later) cannot be tested on this kernel' % os.uname().release)
        return
    old = read(RESTRICT).strip()
    with open(RESTRICT, 'w') as f:
        f.write('1')
    try:
        r = run('tester', ['unshare', '-U', 'true'])
        check('restrict: with the sysctl at 1, an unconfined unprivileged unshare -U is refused',
              r.returncode != 0, r.stderr.strip())
        jail_check('tester')
        jail_call('tester')
    finally:
        with open(RESTRICT, 'w') as f:
            f.write(old)


def main():
    t0 = time.monotonic()
    facts()
    if not os.path.isdir(SECFS) or read('/sys/module/apparmor/parameters/enabled').strip() != 'Y':
        check('AppArmor is enabled in this kernel', False)
    elif load():
        for user in ('root', 'tester'):
            jail_check(user)
            jail_call(user)
            exec_checks(user)
            parent_checks(user)
        userns_checks()
    # What AppArmor refused, as the kernel logged it (no auditd here).
    denied = [line for line in subprocess.run(['dmesg'], capture_output=True, text=True).stdout.splitlines()
              if 'apparmor="DENIED"' in line]
    say('INFO the kernel logged %d AppArmor denials; the last ones:' % len(denied))
    for line in denied[-12:]:
        say('  ' + line[line.find('apparmor='):][:300])
    passed = sum(results)
    failed = len(results) - passed
    say('checks took %.1fs' % (time.monotonic() - t0))
    say('%d passed, %d failed' % (passed, failed))
    say('RESULT ' + ('PASS' if results and not failed else 'FAIL'))
    return 0 if results and not failed else 1


if __name__ == '__main__':
    sys.exit(main())
