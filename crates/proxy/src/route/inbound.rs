//! Stage 1, inbound: a cascade route's request, its body read within the proxy's limits,
//! with the tenant its credentials name.

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::Response;
use bytes::Bytes;
use context_cascade::Format;

use crate::route::body::{BodyLimits, read_request_body};
use crate::state::Tenancy;
use crate::state::Tenant;
use crate::state::sealing::RecallKey;

/// A request on a cascade route, read.
pub(crate) struct Inbound {
    /// The route's wire format.
    pub(crate) format: Format,
    /// Method, address and headers, as the client sent them.
    pub(crate) parts: Parts,
    /// The body, as the client sent it.
    pub(crate) bytes: Bytes,
    /// The keyed hash of its credentials: whose state it may see.
    pub(crate) tenant: Tenant,
    /// The key recall seals its removed originals with (derived from the credentials, never
    /// stored).
    pub(crate) recall_key: RecallKey,
}

impl Inbound {
    /// Reads `request` within `limits`, or the error answer (in `format`) that says which
    /// limit it broke.
    pub(crate) async fn read(
        limits: BodyLimits,
        tenancy: &Tenancy,
        format: Format,
        request: Request,
    ) -> Result<Inbound, Response> {
        let (parts, body) = request.into_parts();
        let bytes = read_request_body(limits, format, &parts.headers, body).await?;
        let tenant = tenancy.tenant(&parts.headers);
        let recall_key = tenancy.recall_key(&parts.headers);
        Ok(Inbound {
            format,
            parts,
            bytes,
            tenant,
            recall_key,
        })
    }

    /// The client's headers.
    pub(crate) fn headers(&self) -> &HeaderMap {
        &self.parts.headers
    }

    /// The path with its query, as the upstream is asked for it.
    pub(crate) fn path(&self) -> &str {
        let uri = &self.parts.uri;
        uri.path_and_query().map_or(uri.path(), |p| p.as_str())
    }
}
