# Host side (outside the jail): walks each directory and prints anything the
# sandbox must never leave there: a setuid, setgid or sticky bit, group or
# other write, an ACL or file capability, a symlink, FIFO, socket or device
# node.  Exit 1 when something was found.
import os, stat, sys
found = []
def look(path):
    st = os.lstat(path)
    m = st.st_mode
    if not (stat.S_ISREG(m) or stat.S_ISDIR(m)):
        found.append("%s: %s" % (path, stat.filemode(m)))
        return
    if m & 0o7022:
        found.append("%s: mode %s" % (path, stat.filemode(m)))
    try:
        for x in os.listxattr(path, follow_symlinks=False):
            if x.startswith(("system.posix_acl", "security.capability", "user.")):
                found.append("%s: xattr %s" % (path, x))
    except OSError:
        pass
for top in sys.argv[1:]:
    look(top)
    for d, subdirs, files in os.walk(top):
        for n in subdirs + files:
            look(os.path.join(d, n))
if found:
    print("\n".join(found)); sys.exit(1)
