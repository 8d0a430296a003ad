halite_no_such_module:
  kmod.present: []

halite_no_such_module_either:
  kmod.absent: []
