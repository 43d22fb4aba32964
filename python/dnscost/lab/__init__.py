"""The lab that ``dnscost observe`` and ``dnscost client`` share, below both: two network
namespaces joined by a veth pair or an emulated link (:mod:`.lab`), the network presets that
shape a link (:mod:`.presets`, read with :mod:`.fields`), the clients an observation watches
(:mod:`.clients`) and the resolution loop that feeds a stub (:mod:`.resolve`), and the page
loads' browsers (:mod:`.browsers`) and DoT stubs (:mod:`.stubs`). It imports neither feature."""
