//! UDP: one connected socket per slot, driven like a connection that never closes: the DNS
//! session of `tcp.rs` over the datagram carrier (`carrier::Datagrams`).

use super::carrier::{Carrier, Datagrams, TcpMeter};
use super::ctx::{Ctx, Schedule, Stop};
use super::session::Tally;
use super::slot::{drive, wait_until, Connection};
use super::tcp::DnsStream;
use super::window::Window;
use dnscost_load::{ConnPolicy, Lifetime};
use dnscost_stats::{Close, ErrorKind};
use dnscost_wire::FrameDecoder;
use std::rc::Rc;

/// Sends one slot's queries over its own socket until the run stops.
pub async fn run_slot(ctx: Rc<Ctx>, mut sched: Schedule, sock: tokio::net::UdpSocket, first_id: u16) {
    let mut window = Window::new(ctx.plan.config.in_flight as usize, first_id);
    let mut dec = FrameDecoder::new(16 * 1024);
    let mut out = Vec::with_capacity(512);
    let mut carrier = Carrier::Udp(Box::new(Datagrams::new(sock)));
    let mut stop = ctx.stop.clone();
    loop {
        let now = ctx.now();
        let mut conn = Connection {
            policy: ConnPolicy::new(Lifetime::default(), None, now),
            tally: Tally::default(),
            meter: TcpMeter::new(now),
        };
        let mut session = DnsStream::new(&mut window, &mut dec, false);
        let end = drive(&ctx, &mut sched, &mut carrier, &mut session, &mut conn, &mut out).await;
        conn.meter.sample(&mut carrier, &mut ctx.counters.borrow_mut());
        if end.close == Close::End {
            break;
        }
        // The socket failed (its outstanding queries are lost): say why, pause, go on.
        if let Some(e) = &end.error {
            ctx.plan.note_error(ErrorKind::Connect, e);
        }
        sched.blocked(ctx.now(), true);
        if !wait_until(&ctx, &mut stop, ctx.now() + 50_000_000, &mut sched).await {
            break;
        }
    }
    let mut c = ctx.counters.borrow_mut();
    if ctx.state(&mut stop) == Stop::Abort {
        sched.abort(&mut c);
    }
    sched.close(ctx.stopped_at(), &mut c);
}
