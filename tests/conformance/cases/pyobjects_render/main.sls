#!pyobjects
include('other')

base = '/tmp/halite-oracle/pyobjects_render'
File.directory(base, makedirs=True)

with File(base):
    File.managed(base + '/a.conf', contents='kernel=' + grains('kernel'))
    Cmd.run('echo-a', name='echo ' + salt.test.echo('hi'), require=File(base + '/a.conf'))

Test.succeed_with_changes('watcher', watch=[File(base + '/a.conf')])
Test.succeed_without_changes('after_other', require=Test('other_state'))
