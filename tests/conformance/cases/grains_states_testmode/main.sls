{#- Each grain a state returns in its changes is not changed by a later
    state: Salt returns its live grain objects, so a later change would
    show up in the earlier return. #}
set_scalar:
  grains.present:
    - name: halite_env
    - value: prod

set_again:
  grains.present:
    - name: halite_env
    - value: prod

change_scalar:
  grains.present:
    - name: halite_env
    - value: staging

refuse_complex:
  grains.present:
    - name: halite_env
    - value: [a, b]

not_a_list:
  grains.list_present:
    - name: halite_env
    - value: x

nested:
  grains.present:
    - name: halite_app:tier
    - value: web

nested_delim:
  grains.present:
    - name: halite_svc,port
    - delimiter: ','
    - value: 8080

roles_new:
  grains.list_present:
    - name: halite_roles
    - value: web

roles_same:
  grains.list_present:
    - name: halite_roles
    - value: web

lst_seed:
  grains.present:
    - name: halite_list
    - value: a

lst_convert:
  grains.append:
    - name: halite_list
    - value: b
    - convert: True

lst_drop:
  grains.list_absent:
    - name: halite_list
    - value:
      - b
      - nothere

lst_append:
  grains.append:
    - name: halite_list
    - value: d

lst_append_same:
  grains.append:
    - name: halite_list
    - value: d

lst_more:
  grains.list_present:
    - name: halite_list
    - value:
      - a
      - c

lst_same:
  grains.list_present:
    - name: halite_list
    - value: c

drop_missing_grain:
  grains.list_absent:
    - name: halite_nosuch
    - value: x

exists_yes:
  grains.exists:
    - name: halite_app:tier

exists_no:
  grains.exists:
    - name: halite_nosuch

append_missing:
  grains.append:
    - name: halite_nosuch
    - value: x

absent_value:
  grains.absent:
    - name: halite_env

absent_gone:
  grains.absent:
    - name: halite_list
    - destructive: True
    - force: True

absent_missing:
  grains.absent:
    - name: halite_nosuch

show:
  module.run:
    - grains.get:
      - halite_app
