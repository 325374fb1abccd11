//! `forktrail serve` of a store in this process, and a client talking HTTP to it.

use forktrail::server::ServerConfig;
use forktrail::{demo, Store};
use reqwest::blocking::{Client, Response};
use std::sync::Arc;
use std::time::Duration;

pub struct Server {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub store: Arc<Store>,
    pub http: Client,
}

/// A [`Server`] of a store that holds the demo tree.
pub struct Demo {
    pub server: Server,
    pub tree: demo::DemoTree,
}

impl std::ops::Deref for Demo {
    type Target = Server;
    fn deref(&self) -> &Server {
        &self.server
    }
}

impl Server {
    /// Serves `store` on a free port of 127.0.0.1, with `config` but for where it binds.
    pub fn start(store: Arc<Store>, config: ServerConfig) -> Self {
        let addr = super::serve_in_process(Arc::clone(&store), config);
        Self {
            base: format!("http://{addr}"),
            store,
            http: Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        }
    }

    /// Builds the demo tree in `store`, then serves it.
    pub fn demo(store: Arc<Store>, config: ServerConfig) -> Demo {
        let tree = demo::build(&store).unwrap();
        Demo {
            server: Self::start(store, config),
            tree,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET path` with this `Accept` header (`*/*` asks for anything).
    pub fn get(&self, path: &str, accept: &str) -> Response {
        self.http
            .get(self.url(path))
            .header("Accept", accept)
            .send()
            .unwrap()
    }

    /// `POST path` of `body` as JSON, with the bearer `token` if any.
    pub fn post_json(
        &self,
        path: &str,
        token: Option<&str>,
        body: impl serde::Serialize,
    ) -> Response {
        let mut r = self.http.post(self.url(path)).json(&body);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send().unwrap()
    }

    /// A SPARQL query in the body of a POST.
    pub fn sparql(&self, query: &str, accept: &str) -> Response {
        self.http
            .post(self.url("/sparql"))
            .header("Content-Type", "application/sparql-query")
            .header("Accept", accept)
            .body(query.to_string())
            .send()
            .unwrap()
    }

    /// A SPARQL update in the body of a POST, with the bearer `token` if any.
    pub fn update(&self, text: &str, token: Option<&str>) -> Response {
        let mut r = self
            .http
            .post(self.url("/update"))
            .header("Content-Type", "application/sparql-update")
            .body(text.to_string());
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send().unwrap()
    }

    /// Every quad of the served store.
    pub fn quads(&self) -> Vec<String> {
        super::quads(&self.store)
    }
}
