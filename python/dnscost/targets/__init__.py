"""Target adapters: the DNS servers dnscost measures, started and configured by dnscost."""
