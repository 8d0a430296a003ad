#!pyobjects
# Map data in the style of Salt's pyobjects docs: matched on grains,
# ordered by priority, merged with the pillar at `merge`.


class Samba(Map):
    merge = 'samba:lookup'
    priority = ('os_family', 'os')

    class Debian:
        server = 'samba'
        service = 'samba'

    class DebianOs:
        __grain__ = 'os'
        __match__ = 'Debian'
        service = 'smbd'

    class RHEL:
        __match__ = 'RedHat'
        server = 'samba-rh'
        service = 'smb'

    class Linux:
        __grain__ = 'kernel'
        kernel_seen = True


class Order(Map):
    class ByOs:
        __grain__ = 'os'
        __match__ = 'Debian'
        value = 'os'

    class Debian:
        value = 'os_family'


# An imported file's states are not registered.
Test.fail_without_changes('never-registered')
