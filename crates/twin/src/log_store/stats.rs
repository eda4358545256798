//! The `stats` block of the log-store twin's query answers, in Loki 3.4's layout (summary,
//! querier, ingester, cache, index), filled from what the query read and returned.

use std::time::Duration;

use serde_json::{Value, json};

/// What a query read and returned (for the `stats` block).
#[derive(Default)]
pub(super) struct Tally {
    pub(super) lines: usize,
    pub(super) bytes: usize,
    pub(super) returned: usize,
}

pub(super) fn stats(t: &Tally, exec: Duration) -> Value {
    let secs = exec.as_secs_f64().max(1e-9);
    let chunk = json!({"headChunkBytes":0,"headChunkLines":0,"decompressedBytes":0,"decompressedLines":0,
        "compressedBytes":0,"totalDuplicates":0,"postFilterLines":0,"headChunkStructuredMetadataBytes":0,
        "decompressedStructuredMetadataBytes":0});
    let mut head = chunk.clone();
    head["headChunkBytes"] = json!(t.bytes);
    head["headChunkLines"] = json!(t.lines);
    head["postFilterLines"] = json!(t.returned);
    let store = |chunk: Value| {
        json!({"totalChunksRef":0,"totalChunksDownloaded":0,"chunksDownloadTime":0,
            "queryReferencedStructuredMetadata":false,"chunk":chunk,"chunkRefsFetchTime":0,
            "congestionControlLatency":0,"pipelineWrapperFilteredLines":0})
    };
    let cache = json!({"entriesFound":0,"entriesRequested":0,"entriesStored":0,"bytesReceived":0,"bytesSent":0,
        "requests":0,"downloadTime":0,"queryLengthServed":0});
    json!({
        "summary": {
            "bytesProcessedPerSecond": (t.bytes as f64 / secs) as u64,
            "linesProcessedPerSecond": (t.lines as f64 / secs) as u64,
            "totalBytesProcessed": t.bytes,
            "totalLinesProcessed": t.lines,
            "execTime": exec.as_secs_f64(),
            "queueTime": 0,
            "subqueries": 0,
            "totalEntriesReturned": t.returned,
            "splits": 0,
            "shards": 1,
            "totalPostFilterLines": t.returned,
            "totalStructuredMetadataBytesProcessed": 0
        },
        "querier": {"store": store(chunk)},
        "ingester": {"totalReached": 1, "totalChunksMatched": 1, "totalBatches": 1, "totalLinesSent": t.returned,
            "store": store(head)},
        "cache": {"chunk": cache, "index": cache, "result": cache, "statsResult": cache, "volumeResult": cache,
            "seriesResult": cache, "labelResult": cache, "instantMetricResult": cache},
        "index": {"totalChunks": 0, "postFilterChunks": 0, "shardsDuration": 0, "usedBloomFilters": false}
    })
}
