#!pyobjects
from salt://samba/map.sls import Samba
from salt://samba/map.sls import Order as Ordering, Samba as S2
import salt://defaults.sls

base = '/tmp/halite-oracle/pyobjects_import_map'
File.directory(base, makedirs=True)
Test.succeed_without_changes(
    'map-values',
    name='server={} service={} kernel_seen={} extra={} order={} same={}'.format(
        Samba.server, Samba.service, getattr(Samba, 'kernel_seen', None),
        getattr(Samba, 'extra', None), Ordering.value, S2 is Samba),
    require=File(base))
Test.succeed_without_changes('module-import', name='port ' + str(defaults.Port))
