"""Real clients observed from the server's side, in the lab (:mod:`dnscost.lab`)."""
