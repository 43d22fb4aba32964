"""Real clients observed from the server's side: the lab they run in (:mod:`.lab`)."""
