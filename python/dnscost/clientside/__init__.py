"""What clients pay: DNS response times and page loads per transport under emulated networks
(``dnscost client``)."""
