//! Headless Chromium through chromedriver: finding both programs, starting chromedriver on a
//! free loopback port, and a browser session that ends with the test, even a failed one.

use fantoccini::elements::Element;
use fantoccini::wd::Capabilities;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a page may take to show what a step waits for.
const WAIT: Duration = Duration::from_secs(15);
/// Longest chromedriver may take to answer `/status` after it starts.
const DRIVER_START: Duration = Duration::from_secs(20);

const CHROME_ARGS: [&str; 5] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--window-size=1280,900",
];

/// Where the programs are: the environment's choice, else Debian's paths.
fn programs() -> Result<(PathBuf, PathBuf), String> {
    let chrome = std::env::var_os("TASKTABLE_TEST_CHROME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/chromium".into());
    let driver = std::env::var_os("TASKTABLE_TEST_CHROMEDRIVER")
        .map(PathBuf::from)
        .or_else(|| on_path("chromedriver"))
        .unwrap_or_else(|| "/usr/bin/chromedriver".into());
    let install = "(apt-get install chromium chromium-driver, or set \
                   TASKTABLE_TEST_CHROME and TASKTABLE_TEST_CHROMEDRIVER)";
    if !driver.is_file() {
        return Err(format!(
            "chromedriver not found at {} {install}",
            driver.display()
        ));
    }
    if !chrome.is_file() {
        return Err(format!(
            "chromium not found at {} {install}",
            chrome.display()
        ));
    }
    Ok((chrome, driver))
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A chromedriver process of this test, killed when dropped.
struct Chromedriver {
    child: Child,
    port: u16,
}

impl Chromedriver {
    async fn start(program: &Path) -> Result<Self, String> {
        // chromedriver cannot be told to pick a port itself, so take a free one and hand it
        // over; another process could take it in between, which the status check reports.
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let child = Command::new(program)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        let mut driver = Chromedriver { child, port };
        driver.wait_ready().await?;
        Ok(driver)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Polls `/status` until chromedriver says it is ready, for at most [`DRIVER_START`].
    async fn wait_ready(&mut self) -> Result<(), String> {
        let http = reqwest::Client::new();
        let status = format!("{}/status", self.url());
        let started = Instant::now();
        let mut last = String::from("no answer");
        while started.elapsed() < DRIVER_START {
            if let Ok(Some(exit)) = self.child.try_wait() {
                return Err(format!("chromedriver exited at start ({exit})"));
            }
            match http
                .get(&status)
                .timeout(Duration::from_secs(2))
                .send()
                .await
            {
                Ok(resp) => match resp.json::<serde_json::Value>().await {
                    Ok(body) if body["value"]["ready"] == true => return Ok(()),
                    Ok(body) => last = body.to_string(),
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!(
            "chromedriver on port {} was not ready after {DRIVER_START:?}: {last}",
            self.port
        ))
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium session. `close` ends it; a test that panics before then ends it
/// in `drop`, so no browser outlives its test.
pub struct Browser {
    client: Client,
    session_id: String,
    closed: bool,
    driver: Chromedriver,
}

impl Browser {
    /// A fresh browser, or `None` (with the reason on stderr) when chromedriver or Chromium
    /// is not installed. Under CI a missing browser fails the test instead: a green run
    /// must mean the browser tests ran.
    pub async fn start() -> Option<Browser> {
        let (chrome, driver_program) = match programs() {
            Ok(found) => found,
            Err(reason) if ci() => panic!("browser tests need Chromium under CI: {reason}"),
            Err(reason) => {
                eprintln!("skipping: {reason}");
                return None;
            }
        };
        let driver = Chromedriver::start(&driver_program)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut caps = Capabilities::new();
        caps.insert("browserName".into(), "chrome".into());
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({ "binary": chrome, "args": CHROME_ARGS }),
        );
        // chromedriver listens on loopback over plain HTTP, so no TLS.
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&driver.url())
            .await
            .unwrap_or_else(|e| panic!("chromedriver could not start {}: {e}", chrome.display()));
        let session_id = client
            .session_id()
            .await
            .expect("session id")
            .expect("a session was created");
        Some(Browser {
            client,
            session_id,
            closed: false,
            driver,
        })
    }

    pub async fn close(mut self) {
        self.client
            .clone()
            .close()
            .await
            .expect("the browser session ends");
        self.closed = true;
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    pub async fn path(&self) -> String {
        self.client
            .current_url()
            .await
            .expect("current url")
            .path()
            .to_owned()
    }

    /// The element `locator` finds once it is on the page; fails with the page's text.
    pub async fn find(&self, locator: Locator<'_>) -> Element {
        match self.client.wait().at_most(WAIT).for_element(locator).await {
            Ok(element) => element,
            Err(e) => panic!(
                "{locator:?} did not appear within {WAIT:?} on {} ({e}); the page reads:\n{}",
                self.path().await,
                self.text("body").await
            ),
        }
    }

    pub async fn css(&self, selector: &str) -> Element {
        self.find(Locator::Css(selector)).await
    }

    /// Runs `script` in the page and returns what it returns.
    pub async fn execute(&self, script: &str) -> serde_json::Value {
        self.client
            .execute(script, Vec::new())
            .await
            .unwrap_or_else(|e| panic!("run {script:?}: {e}"))
    }

    /// The visible text of the first element `selector` matches.
    pub async fn text(&self, selector: &str) -> String {
        let element = self.client.find(Locator::Css(selector)).await;
        match element {
            Ok(e) => e.text().await.expect("element text"),
            Err(e) => format!("({selector} not found: {e})"),
        }
    }

    pub async fn count(&self, selector: &str) -> usize {
        self.client
            .find_all(Locator::Css(selector))
            .await
            .expect("find_all")
            .len()
    }

    /// Types `value` into the field named `name`, replacing what it held.
    pub async fn fill(&self, name: &str, value: &str) {
        let field = self.css(&format!("[name=\"{name}\"]")).await;
        field.clear().await.expect("clear field");
        field.send_keys(value).await.expect("type into field");
    }

    pub async fn click(&self, selector: &str) {
        self.css(selector).await.click().await.expect("click");
    }

    /// Waits for the page's message (after a form) to read `text`.
    pub async fn flash(&self, class: &str, text: &str) {
        let xpath = format!(
            "//div[contains(concat(' ', @class, ' '), ' {class} ') \
             and contains(normalize-space(.), '{text}')]"
        );
        self.find(Locator::XPath(&xpath)).await;
    }

    /// A PNG of the window, or with `full_page` of the whole page at the window's width.
    pub async fn screenshot(&self, full_page: bool) -> Vec<u8> {
        if full_page {
            // The window's size includes its frame: grow it by what the page lacks.
            let height = self
                .client
                .execute(
                    "return document.documentElement.scrollHeight \
                     + window.outerHeight - window.innerHeight",
                    vec![],
                )
                .await
                .expect("page height")
                .as_u64()
                .expect("a number");
            self.client
                .set_window_size(1280, height.clamp(600, 4000) as u32)
                .await
                .expect("resize to the page");
        }
        let png = self.client.screenshot().await.expect("screenshot");
        if full_page {
            self.client
                .set_window_size(1280, 900)
                .await
                .expect("resize back");
        }
        png
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.closed {
            // Ending the session makes chromedriver quit Chromium; killing chromedriver
            // alone (next, when `driver` drops) would leave Chromium running.
            delete_session(self.driver.port, &self.session_id);
        }
    }
}

/// `DELETE /session/{id}`, blocking: `drop` cannot await, and this runs while a failed
/// test unwinds.
fn delete_session(port: u16, session_id: &str) {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let request = format!(
        "DELETE /session/{session_id} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_ok() {
        // chromedriver answers once Chromium has quit; the first bytes of the answer are
        // enough, and it may keep the connection open after them.
        let _ = stream.read(&mut [0; 512]);
    }
}

fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}
