//! dnscost-capture: a packet capture's DNS traffic as flows (`flows`), read from a pcap or
//! pcapng file (`read`, the only I/O); the packets' headers (`packet`), TCP directions put in
//! order and cut into DNS messages or TLS records (`stream`), and the TLS hellos (`tls`).

pub mod flows;
pub mod packet;
pub mod read;
pub mod stream;
pub mod tls;
