//! A real `redis-server` for the tests that need one (`--features redis-tests`): the binary
//! from `$REDIS_SERVER` or the PATH, on a free loopback port, persisting nothing, killed
//! when dropped. Missing binary: the test fails (scripts/ci-redis.sh installs it).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server on a free port.
    pub fn start() -> RedisServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = RedisServer { port, child: None };
        server.restart();
        server
    }

    /// `redis://127.0.0.1:PORT/DB`.
    pub fn url(&self, db: u8) -> String {
        format!("redis://127.0.0.1:{}/{db}", self.port)
    }

    /// Starts the server again on its port (after [`RedisServer::stop`]); waits until it
    /// answers PING.
    pub fn restart(&mut self) {
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let child = Command::new(&binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{binary}: {e} (install redis-server or set $REDIS_SERVER)")
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.command("PING") != "+PONG" {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (its data goes with it: nothing is persisted).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends one inline command; returns the first line of the answer ("" when the server
    /// cannot be reached).
    pub fn command(&self, line: &str) -> String {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return String::new();
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        if stream.write_all(format!("{line}\r\n").as_bytes()).is_err() {
            return String::new();
        }
        let mut buffer = [0u8; 512];
        let n = stream.read(&mut buffer).unwrap_or(0);
        let text = String::from_utf8_lossy(&buffer[..n]);
        text.lines().next().unwrap_or("").to_string()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
