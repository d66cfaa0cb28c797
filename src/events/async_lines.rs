//! Reading a live stream (a running CLI's stdout) line by line with a line cap, without ever
//! holding more than the cap: the async twin of [`super::read_lines`]. An over-long line is read
//! and discarded piece by piece and reported with its length, so one 200 MiB line costs a
//! buffer of at most the cap, not 200 MiB.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line from [`read_line_capped`].
#[derive(Debug, PartialEq, Eq)]
pub enum LiveLine {
    /// The stream ended (nothing was read).
    End,
    /// A line is in the buffer (without its newline).
    Complete,
    /// A line longer than the cap was discarded; it held this many bytes.
    Oversized { bytes: u64 },
}

/// Reads the next line into `line` (cleared first). Memory: `line` grows to at most `cap`.
pub async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<LiveLine> {
    line.clear();
    let mut discarded: u64 = 0;
    let mut any = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (any, discarded) {
                (false, _) => LiveLine::End,
                (true, 0) => LiveLine::Complete,
                (true, bytes) => LiveLine::Oversized { bytes },
            });
        }
        any = true;
        let (chunk, consumed, done) = match memchr_newline(available) {
            Some(at) => (&available[..at], at + 1, true),
            None => (available, available.len(), false),
        };
        if discarded == 0 && line.len() + chunk.len() <= cap {
            line.extend_from_slice(chunk);
        } else {
            discarded += (line.len() + chunk.len()) as u64;
            line.clear();
        }
        reader.consume(consumed);
        if done {
            return Ok(if discarded == 0 {
                LiveLine::Complete
            } else {
                LiveLine::Oversized { bytes: discarded }
            });
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all_lines(input: &[u8], cap: usize, buffer: usize) -> Vec<Result<Vec<u8>, u64>> {
        let mut reader = tokio::io::BufReader::with_capacity(buffer, input);
        let mut line = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_line_capped(&mut reader, &mut line, cap).await.unwrap() {
                LiveLine::End => return out,
                LiveLine::Complete => {
                    assert!(line.len() <= cap);
                    out.push(Ok(line.clone()))
                }
                LiveLine::Oversized { bytes } => out.push(Err(bytes)),
            }
        }
    }

    #[tokio::test]
    async fn lines_are_split_and_long_ones_dropped_with_their_length() {
        let input = b"short\n0123456789abcdef\nok\nlast-without-newline";
        for buffer in [1, 3, 7, 64] {
            assert_eq!(
                all_lines(input, 8, buffer).await,
                vec![Ok(b"short".to_vec()), Err(16), Ok(b"ok".to_vec()), Err(20),],
                "buffer {buffer}"
            );
            assert_eq!(
                all_lines(input, 32, buffer).await,
                vec![
                    Ok(b"short".to_vec()),
                    Ok(b"0123456789abcdef".to_vec()),
                    Ok(b"ok".to_vec()),
                    Ok(b"last-without-newline".to_vec()),
                ]
            );
        }
        assert_eq!(all_lines(b"", 8, 4).await, vec![]);
        assert_eq!(all_lines(b"\n\n", 8, 4).await, vec![Ok(vec![]), Ok(vec![])]);
    }

    #[tokio::test]
    async fn a_huge_line_never_grows_the_buffer_past_the_cap() {
        let mut input = vec![b'x'; 8 << 20];
        input.extend_from_slice(b"\n{\"after\":1}\n");
        let mut reader = tokio::io::BufReader::with_capacity(1 << 16, &input[..]);
        let mut line = Vec::new();
        let first = read_line_capped(&mut reader, &mut line, 1 << 16)
            .await
            .unwrap();
        assert_eq!(first, LiveLine::Oversized { bytes: 8 << 20 });
        assert!(line.capacity() <= 2 << 16, "capacity {}", line.capacity());
        let second = read_line_capped(&mut reader, &mut line, 1 << 16)
            .await
            .unwrap();
        assert_eq!(second, LiveLine::Complete);
        assert_eq!(line, b"{\"after\":1}");
    }
}
