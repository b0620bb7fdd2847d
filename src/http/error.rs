//! Request errors and the one place that maps them to a status.
//!
//! Every rejection the connection loop makes goes through [`ParseError::status`]
//! (hyper's `on_error`): the status, whether the connection must close, and the
//! short body are decided here and nowhere else.

use super::response::Status;

/// Why a request head (or its framing) was refused.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("request head larger than {limit} bytes")]
    HeadTooLarge { limit: usize },
    #[error("request line longer than {limit} bytes")]
    UriTooLong { limit: usize },
    #[error("more than {limit} header fields")]
    TooManyHeaders { limit: usize },
    #[error("malformed request head: {0}")]
    Malformed(httparse::Error),
    #[error("Content-Length together with Transfer-Encoding")]
    ContentLengthWithTransferEncoding,
    #[error("Content-Length is not 1*DIGIT")]
    InvalidContentLength,
    #[error("repeated Content-Length with different values")]
    ConflictingContentLength,
    #[error("{count} Host header fields (exactly one required)")]
    BadHost { count: usize },
    #[error("Transfer-Encoding on a request without a body we accept")]
    UnsupportedTransferEncoding,
    #[error("request body of {length} bytes on a method that takes none is too large to discard")]
    BodyTooLarge { length: u64 },
}

impl ParseError {
    /// The status this error is answered with. Every parse error closes the
    /// connection: after a framing error the byte stream cannot be trusted.
    pub fn status(&self) -> Status {
        match self {
            ParseError::HeadTooLarge { .. } | ParseError::TooManyHeaders { .. } => {
                Status::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            ParseError::UriTooLong { .. } => Status::URI_TOO_LONG,
            ParseError::UnsupportedTransferEncoding => Status::NOT_IMPLEMENTED,
            ParseError::BodyTooLarge { .. } => Status::PAYLOAD_TOO_LARGE,
            ParseError::Malformed(_)
            | ParseError::ContentLengthWithTransferEncoding
            | ParseError::InvalidContentLength
            | ParseError::ConflictingContentLength
            | ParseError::BadHost { .. } => Status::BAD_REQUEST,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_map_to_431_and_414() {
        assert_eq!(
            ParseError::HeadTooLarge { limit: 1 }.status(),
            Status::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
        assert_eq!(
            ParseError::TooManyHeaders { limit: 1 }.status(),
            Status::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
        assert_eq!(
            ParseError::UriTooLong { limit: 1 }.status(),
            Status::URI_TOO_LONG
        );
        assert_eq!(
            ParseError::ContentLengthWithTransferEncoding.status(),
            Status::BAD_REQUEST
        );
    }
}
