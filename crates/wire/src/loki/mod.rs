//! Loki's formats: its JSON answers (`json.rs`), its push bodies (`push.rs`) and which storage
//! its running config uses (`config.rs`), one façade for the verbs and the twin.

mod config;
mod json;
mod push;

pub use config::{is_object_storage, object_stores};
pub use json::{
    LogEntry, MetricSample, QueryResult, StreamOut, parse_query, parse_strings, write_matrix, write_series,
    write_streams, write_strings, write_vector,
};
pub use push::{
    Encoding, PushEntry, PushStream, decode, encode_json, encode_protobuf, encoding_of, labels_text, valid_label_name,
};
