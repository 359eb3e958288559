//! The framing of Raft's streamed appends (`/raft/stream`): each message a
//! frame of its MessagePack preceded by its length (4 bytes, big-endian), the
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
    /// A whole frame that is not the MessagePack of the message expected.
    #[error("frame {index}: malformed message: {source}")]
    Malformed { index: u64, source: rmp_serde::decode::Error },
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
    rmp_serde::encode::write_named(&mut *frames, message).expect("a Raft message serializes to MessagePack");
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
                Ok(frame) => rmp_serde::from_slice(&frame).map_err(|source| FrameError::Malformed { index, source }),
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
    use proptest::prelude::*;
    use redolog_raft::openraft_0_10::openraft;

    use super::*;
    use crate::machine::{Command, Request, Response, Session, TypeConfig};

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

    /// Fields go by name: a field skipped when empty (as `Response`'s
    /// `replayed` and `stale` are, and as an application's own entry types
    /// may be) does not shift the ones after it, as it would in
    /// MessagePack's compact form.
    #[tokio::test]
    async fn fields_skipped_when_empty_read_back() {
        let answers: Vec<Response> = [(false, false), (true, false), (false, true)]
            .into_iter()
            .map(|(replayed, stale)| Response { previous: Some("v".into()), applied: !stale, replayed, stale })
            .collect();
        let mut bytes = Vec::new();
        for answer in &answers {
            encode_into(&mut bytes, answer);
        }
        let read: Vec<Response> =
            decode::<Response, _>(chunks(bytes, 3)).try_collect().await.expect("every frame whole");
        assert_eq!(read, answers);
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().expect("a runtime").block_on(future)
    }

    fn command() -> impl Strategy<Value = Command> {
        let text = "[a-z\"\\\\\u{0}-\u{1f}é€😀]{0,12}";
        let request = prop_oneof![
            (text, text).prop_map(|(key, value)| Request::Set { key, value }),
            text.prop_map(|key| Request::Delete { key }),
            (text, proptest::option::of(text), text).prop_map(|(key, expected, new)| Request::Cas {
                key,
                expected,
                new
            }),
        ];
        let session =
            proptest::option::of((any::<u64>(), any::<u64>()).prop_map(|(client, seq)| Session { client, seq }));
        (request, session).prop_map(|(request, session)| Command { request, session })
    }

    proptest! {
        /// The replicated commands — a flattened, internally tagged enum
        /// read through `FlatCommand`, an optional session skipped when
        /// absent — read back as written, however the bytes are cut.
        #[test]
        fn commands_read_back_whatever_the_chunks(
            messages in proptest::collection::vec(proptest::collection::vec(command(), 0..4), 0..6),
            size in 1usize..40,
        ) {
            let mut bytes = Vec::new();
            for message in &messages {
                encode_into(&mut bytes, message);
            }
            let read: Vec<Vec<Command>> = block_on(decode::<Vec<Command>, _>(chunks(bytes, size)).try_collect())
                .expect("every frame whole");
            prop_assert_eq!(read, messages);
        }

        /// Any bytes from the network: the decoder ends, never panics, and
        /// yields messages, then at most one error — the last item.
        #[test]
        fn any_bytes_end_in_messages_then_at_most_one_error(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
            size in 1usize..40,
        ) {
            type Request = openraft::raft::AppendEntriesRequest<TypeConfig>;
            let read: Vec<Result<Request, FrameError>> = block_on(decode::<Request, _>(chunks(bytes, size)).collect());
            let errors = read.iter().filter(|parsed| parsed.is_err()).count();
            prop_assert!(errors <= 1);
            prop_assert!(errors == 0 || read.last().is_some_and(Result::is_err));
        }
    }

    #[tokio::test]
    async fn an_oversized_length_is_refused_before_it_is_read() {
        let bytes = u32::MAX.to_be_bytes().to_vec();
        let read = read_all(bytes, 4).await;
        assert!(matches!(&read[..], [Err(FrameError::Io(_))]), "{read:?}");
    }
}
