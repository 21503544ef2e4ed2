//! What the embedded server keeps for a run's capture: its TLS secrets (always, in memory: the
//! head-of-line analysis decrypts QUIC with them) and, when asked, a qlog per QUIC connection.

use std::io;
use std::sync::{Arc, Mutex};

/// Shared by the TLS configurations and the QUIC accept loop.
#[derive(Debug, Default)]
pub struct ServerCapture {
    /// NSS key log lines since the last [`ServerCapture::take_keys`].
    keys: Mutex<String>,
    /// `Some` while qlog is on: each QUIC connection's name and its qlog.
    qlogs: Mutex<Option<Vec<(String, SharedBuffer)>>>,
}

impl ServerCapture {
    /// The key log lines logged since the last call (NSS `SSLKEYLOGFILE` format).
    pub fn take_keys(&self) -> String {
        std::mem::take(&mut *lock(&self.keys))
    }

    /// Turns per-connection qlog on or off for connections accepted from now on (turning it
    /// on again drops qlogs not taken).
    pub fn set_qlog(&self, on: bool) {
        *lock(&self.qlogs) = on.then(Vec::new);
    }

    pub fn qlog_on(&self) -> bool {
        lock(&self.qlogs).is_some()
    }

    /// A qlog sink for a new connection named `name`, if qlog is on.
    pub(crate) fn qlog_writer(&self, name: String) -> Option<SharedBuffer> {
        let mut q = lock(&self.qlogs);
        let list = q.as_mut()?;
        let buf = SharedBuffer::default();
        list.push((name, buf.clone()));
        Some(buf)
    }

    /// The qlogs of the connections accepted since qlog was turned on (or last taken): name
    /// and JSON-SEQ text so far.
    pub fn take_qlogs(&self) -> Vec<(String, Vec<u8>)> {
        let mut q = lock(&self.qlogs);
        let Some(list) = q.as_mut() else {
            return Vec::new();
        };
        std::mem::take(list)
            .into_iter()
            .map(|(name, buf)| (name, std::mem::take(&mut *lock(&buf.0))))
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// rustls logs every secret here, as NSS key log lines.
#[derive(Debug)]
pub(crate) struct MemoryKeyLog(pub Arc<ServerCapture>);

impl rustls::KeyLog for MemoryKeyLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let line = format!(
            "{label} {} {}\n",
            hex::encode(client_random),
            hex::encode(secret)
        );
        lock(&self.0.keys).push_str(&line);
    }
}

/// A qlog streamer's writer: bytes kept in memory until the run takes them.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl io::Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        lock(&self.0).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::KeyLog;

    #[test]
    fn keys_are_nss_lines_taken_once_and_qlogs_only_while_on() {
        let c = Arc::new(ServerCapture::default());
        MemoryKeyLog(c.clone()).log("SERVER_TRAFFIC_SECRET_0", &[0xab; 2], &[1, 2]);
        assert_eq!(c.take_keys(), "SERVER_TRAFFIC_SECRET_0 abab 0102\n");
        assert_eq!(c.take_keys(), "");
        assert!(c.qlog_writer("a".into()).is_none());
        c.set_qlog(true);
        let mut w = c.qlog_writer("conn".into()).unwrap();
        io::Write::write_all(&mut w, b"\x1e{}\n").unwrap();
        assert_eq!(
            c.take_qlogs(),
            vec![("conn".to_string(), b"\x1e{}\n".to_vec())]
        );
        c.set_qlog(false);
        assert!(c.take_qlogs().is_empty());
    }
}
