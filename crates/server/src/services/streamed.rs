//! Answers written on a blocking thread and sent while they are written, so an answer of
//! any length holds one piece of it at a time.

use std::io;

use axum::body::Body;
use tokio::sync::mpsc;

/// Bytes gathered before they are sent.
const PIECE: usize = 64 << 10;

/// The body `write` writes, sent in pieces of about 64 KiB as they fill. An error from
/// `write` cuts the body short as an error, so the client sees a broken answer, never a
/// complete-looking one; a client that goes away makes the next write fail.
pub(crate) fn streamed(write: impl FnOnce(&mut Pieces) -> io::Result<()> + Send + 'static) -> Body {
    let (tx, rx) = mpsc::channel::<io::Result<Vec<u8>>>(2);
    tokio::task::spawn_blocking(move || {
        let mut pieces = Pieces {
            out: Vec::with_capacity(PIECE + 1024),
            tx,
        };
        if let Err(e) = write(&mut pieces).and_then(|()| pieces.send()) {
            let _ = pieces.tx.blocking_send(Err(e));
        }
    });
    let pieces = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|piece| (piece, rx))
    });
    Body::from_stream(pieces)
}

/// Where a streamed answer is written.
pub(crate) struct Pieces {
    out: Vec<u8>,
    tx: mpsc::Sender<io::Result<Vec<u8>>>,
}

impl Pieces {
    fn send(&mut self) -> io::Result<()> {
        let piece = std::mem::replace(&mut self.out, Vec::with_capacity(PIECE + 1024));
        self.tx
            .blocking_send(Ok(piece))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl io::Write for Pieces {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.extend_from_slice(buf);
        if self.out.len() >= PIECE {
            self.send()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
