//! The framing of Raft's streamed appends (`/raft/stream`): each message a
//! frame of its JSON preceded by its length (4 bytes, big-endian), the
//! framing tokio-util's `LengthDelimitedCodec` reads by default. A request
//! body carries the leader's `AppendEntriesRequest`s one frame each; the
//! response body the follower's answers, one per request, in order.

use std::io;

use axum::body::Bytes;
use futures_util::{Stream, StreamExt, TryStream, TryStreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
use tokio_util::io::StreamReader;

/// The largest frame a reader accepts: an `AppendEntriesRequest` carries at
/// most openraft's `max_payload_entries` (300) entries, far below this.
pub const MAX_FRAME: usize = 64 << 20;

/// Why a stream of frames stopped short.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The bytes under the frames failed (the connection, the body), or a
    /// frame announced more than [`MAX_FRAME`] bytes.
    #[error("reading frames: {0}")]
    Io(#[from] io::Error),
    /// A whole frame that is not the JSON of the message expected.
    #[error("frame {index}: malformed message: {source}")]
    Malformed { index: u64, source: serde_json::Error },
}

/// `message` as one frame.
pub fn encode<T: Serialize>(message: &T) -> Bytes {
    let mut frame = Vec::with_capacity(512);
    encode_into(&mut frame, message);
    Bytes::from(frame)
}

/// Appends `message` as one frame to `frames`.
pub fn encode_into<T: Serialize>(frames: &mut Vec<u8>, message: &T) {
    let start = frames.len();
    frames.extend_from_slice(&[0; 4]);
    serde_json::to_writer(&mut *frames, message).expect("a Raft message serializes to JSON");
    let length = u32::try_from(frames.len() - start - 4).expect("a frame below 4 GiB");
    frames[start..start + 4].copy_from_slice(&length.to_be_bytes());
}

/// The messages framed in `bytes`, in order (KV-5). The stream ends after the
/// first error: a frame cut short by the end of the bytes is an
/// [`FrameError::Io`] ("bytes remaining on stream"), never a message
/// skipped.
pub fn decode<T, S>(bytes: S) -> impl Stream<Item = Result<T, FrameError>> + Send + 'static
where
    T: DeserializeOwned + Send + 'static,
    S: TryStream<Ok = Bytes> + Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let reader = StreamReader::new(bytes.map_err(io::Error::other).into_stream());
    let codec = LengthDelimitedCodec::builder().max_frame_length(MAX_FRAME).new_codec();
    let mut index = 0;
    let mut failed = false;
    FramedRead::new(reader, codec)
        .map(move |frame| {
            let parsed = match frame {
                Ok(frame) => serde_json::from_slice(&frame).map_err(|source| FrameError::Malformed { index, source }),
                Err(error) => Err(FrameError::Io(error)),
            };
            index += 1;
            parsed
        })
        .take_while(move |parsed| {
            let go_on = !failed;
            failed |= parsed.is_err();
            std::future::ready(go_on)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(bytes: Vec<u8>, size: usize) -> impl Stream<Item = Result<Bytes, io::Error>> + Send + 'static {
        let pieces: Vec<_> = bytes.chunks(size).map(|piece| Ok(Bytes::copy_from_slice(piece))).collect();
        futures_util::stream::iter(pieces)
    }

    async fn read_all(bytes: Vec<u8>, size: usize) -> Vec<Result<Vec<u32>, FrameError>> {
        decode::<Vec<u32>, _>(chunks(bytes, size)).collect().await
    }

    #[tokio::test]
    async fn frames_read_back_whatever_the_chunks() {
        let messages = vec![vec![1, 2, 3], vec![], vec![u32::MAX; 100]];
        let mut bytes = Vec::new();
        for message in &messages {
            encode_into(&mut bytes, message);
        }
        assert_eq!(&bytes[..encode(&messages[0]).len()], &encode(&messages[0])[..], "one frame either way");
        for size in [1, 3, 4, 5, 7, 64, bytes.len()] {
            let read: Vec<_> = read_all(bytes.clone(), size).await.into_iter().map(Result::unwrap).collect();
            assert_eq!(read, messages, "chunks of {size} bytes");
        }
    }

    #[tokio::test]
    async fn a_frame_cut_short_is_an_error_not_a_message() {
        let mut bytes = encode(&vec![7u32]).to_vec();
        bytes.extend_from_slice(&encode(&vec![8u32, 9])[..6]);
        let read = read_all(bytes, 2).await;
        assert_eq!(read.len(), 2, "{read:?}");
        assert_eq!(read[0].as_ref().expect("the whole frame"), &vec![7]);
        assert!(matches!(&read[1], Err(FrameError::Io(_))), "{read:?}");
    }

    #[tokio::test]
    async fn a_malformed_frame_ends_the_stream_naming_its_index() {
        let mut bytes = encode(&vec![1u32]).to_vec();
        bytes.extend_from_slice(&encode(&"not a list"));
        bytes.extend_from_slice(&encode(&vec![2u32]));
        let read = read_all(bytes, 5).await;
        assert_eq!(read.len(), 2, "nothing after the malformed frame: {read:?}");
        assert!(matches!(&read[1], Err(FrameError::Malformed { index: 1, .. })), "{read:?}");
    }

    #[tokio::test]
    async fn an_oversized_length_is_refused_before_it_is_read() {
        let bytes = u32::MAX.to_be_bytes().to_vec();
        let read = read_all(bytes, 4).await;
        assert!(matches!(&read[..], [Err(FrameError::Io(_))]), "{read:?}");
    }
}
