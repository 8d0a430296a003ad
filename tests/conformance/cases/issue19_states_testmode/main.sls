locale_system_bogus:
  locale.system:
    - name: xx_BOGUS.UTF-8

locale_present_bogus:
  locale.present:
    - name: xx_BOGUS.UTF-8

debconf_set:
  debconf.set:
    - name: halite-oracle-pkg
    - data:
        halite-oracle-pkg/question: {'type': 'string', 'value': 'answer'}

