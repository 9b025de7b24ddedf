//! The split: which messages of the middle strategies ③–⑤ take out, and what they keep.
//!
//! Kept, always: every system message, the first user message, pinned messages, the
//! current (last) message, and a tail of recent messages before it. A tool exchange (an
//! assistant message and the results of its calls) is never split at the edge of the kept
//! tail: the tail's start moves back to the assistant message that issued the calls, and a
//! kept result keeps its call. The cascade's own notices in the removed range are folded
//! into the new one (their counts add up), so compacting twice says how many messages went
//! in all, and compacting an already compacted conversation changes nothing.

use crate::conversation::{Block, Conversation, Format, Message, Role};
use crate::markers::{self, SUMMARY_PREFIX};

/// What a strategy keeps besides the irreducible messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeepRules {
    /// Recent messages kept before the current one (SPEC: N = min(6, ⌊total/3⌋)).
    pub recent: usize,
    /// What becomes of earlier `[context summary]` messages in the middle.
    pub summaries: Summaries,
}

impl KeepRules {
    /// `recent` messages, earlier summaries kept (③ and ⑤ level 3).
    pub(crate) fn keeping(recent: usize) -> Self {
        KeepRules {
            recent,
            summaries: Summaries::Keep,
        }
    }
}

/// What a strategy does with an earlier `[context summary]` in the range it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Summaries {
    /// Kept where it stands (③ and ⑤ level 3: all that is left of what came before).
    Keep,
    /// Handed to the summarizer as the previous summary to update (④).
    Update,
}

/// How one message stands in the split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    Keep,
    Remove,
    /// An earlier notice of the cascade, folded into the new one.
    FoldNotice,
    /// An earlier summary, handed to the summarizer as the previous summary (④).
    PreviousSummary,
}

/// The middle of one conversation, for a given tail length.
#[derive(Debug, Clone)]
pub(crate) struct Split {
    pub fates: Vec<Fate>,
    /// Where the replacement message goes: the place of the first message taken out.
    pub insert_at: usize,
    /// Ordinary messages removed (notices and summaries not counted).
    pub removed: usize,
    /// Messages removed by earlier compactions, read from the folded notices.
    pub removed_before: usize,
    /// Anthropic: later gaps (a kept message inside the removed range splits it) whose kept
    /// neighbours have the same role, as (where, messages removed there). Each gets a notice
    /// of its own so that user and assistant turns still alternate; the first gap has the
    /// replacement.
    pub bridges: Vec<(usize, usize)>,
}

impl Split {
    /// Messages the new notice reports as removed (those of the bridging notices aside, so
    /// that the counts add up when a later compaction folds them all).
    pub(crate) fn total_removed(&self) -> usize {
        let bridged: usize = self.bridges.iter().map(|(_, n)| n).sum();
        (self.removed + self.removed_before).saturating_sub(bridged)
    }

    /// The notices that keep turns alternating across the later gaps.
    pub(crate) fn bridge_messages(&self) -> Vec<Message> {
        (self.bridges.iter())
            .map(|(_, n)| notice_message(*n))
            .collect()
    }

    /// Whether the split takes out anything new. Folding old notices, or re-summarizing an
    /// old summary, with nothing new beside them would only rewrite what is there.
    pub(crate) fn is_effective(&self) -> bool {
        self.removed > 0
    }

    /// The messages taken out that a summary stands for (not the notices and summaries).
    pub(crate) fn removed_messages<'a>(
        &'a self,
        conversation: &'a Conversation,
    ) -> impl Iterator<Item = (usize, &'a Message)> {
        conversation
            .messages
            .iter()
            .enumerate()
            .filter(|(i, _)| self.fates[*i] == Fate::Remove)
    }

    /// The text of the earlier summaries taken out, without their first line.
    pub(crate) fn previous_summary(&self, conversation: &Conversation) -> Option<String> {
        let parts: Vec<String> = conversation
            .messages
            .iter()
            .zip(&self.fates)
            .filter(|(_, f)| **f == Fate::PreviousSummary)
            .map(|(m, _)| {
                let text = m.text_content();
                text.strip_prefix(SUMMARY_PREFIX)
                    .unwrap_or(&text)
                    .trim()
                    .to_owned()
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// Replaces everything taken out with `replacement`, at [`Split::insert_at`].
    pub(crate) fn apply(&self, conversation: &mut Conversation, replacement: Message) {
        let messages = std::mem::take(&mut conversation.messages);
        let mut out = Vec::with_capacity(messages.len() + 1);
        let mut replacement = Some(replacement);
        let mut bridges = self.bridges.iter().zip(self.bridge_messages()).peekable();
        for (index, message) in messages.into_iter().enumerate() {
            if index == self.insert_at
                && let Some(r) = replacement.take()
            {
                out.push(r);
            }
            if let Some(((_, _), notice)) = bridges.next_if(|((at, _), _)| *at == index) {
                out.push(notice);
            }
            if self.fates[index] == Fate::Keep {
                out.push(message);
            }
        }
        conversation.messages = out;
    }
}

/// For every message, the index of the message that opened its tool exchange: itself,
/// or for a tool result the assistant message that issued the call.
pub(crate) fn exchange_starts(conversation: &Conversation) -> Vec<usize> {
    let messages = &conversation.messages;
    let mut starts: Vec<usize> = (0..messages.len()).collect();
    for index in 1..messages.len() {
        let previous = &messages[index - 1];
        let is_result = match conversation.format {
            Format::Anthropic => {
                messages[index].role() == Role::User
                    && messages[index].tool_results().next().is_some()
            }
            _ => messages[index].role().is_tool_result(),
        };
        if !is_result {
            continue;
        }
        if previous.role() == Role::Assistant && previous.tool_calls().next().is_some() {
            starts[index] = index - 1;
        } else if previous.role().is_tool_result() && conversation.format != Format::Anthropic {
            starts[index] = starts[index - 1];
        }
    }
    starts
}

/// The current turn: the index of the user's latest instruction (the last user message
/// with text of its own, not only tool results, and not a notice of the cascade) and of
/// the first assistant message after it (the one that carries the turn's thinking).
pub(crate) fn current_turn(conversation: &Conversation) -> Option<(usize, Option<usize>)> {
    let messages = &conversation.messages;
    let instruction = messages.iter().rposition(|m| {
        m.role() == Role::User
            && m.blocks().iter().any(|b| {
                matches!(b, Block::Text(t) if !t.text.trim().is_empty() && !markers::is_cascade_notice(&t.text))
            })
    })?;
    let answer = (instruction + 1..messages.len()).find(|&i| messages[i].role() == Role::Assistant);
    Some((instruction, answer))
}

/// The messages no strategy may take out: system, first user, pinned, current, the current
/// turn's instruction and first answer, with the tool exchanges they belong to (a kept
/// result keeps its call; a kept call, its results).
pub(crate) fn irreducible(conversation: &Conversation, starts: &[usize]) -> Vec<bool> {
    let messages = &conversation.messages;
    let n = messages.len();
    let first_user = conversation.first_user_index();
    let turn = current_turn(conversation);
    let (instruction, answer) = match turn {
        Some((i, a)) => (Some(i), a),
        None => (None, None),
    };
    let mut keep: Vec<bool> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            m.role().is_system()
                || m.is_pinned()
                || Some(i) == first_user
                || i + 1 == n
                || Some(i) == instruction
                || Some(i) == answer
        })
        .collect();
    // A kept result keeps the assistant message of its exchange...
    for i in 0..n {
        if keep[i] {
            keep[starts[i]] = true;
        }
    }
    // ...and a kept assistant message keeps the results of its calls.
    for i in 0..n {
        if keep[starts[i]] {
            keep[i] = true;
        }
    }
    keep
}

impl Conversation {
    /// For every message, whether no strategy may take it out: system, first user, pinned
    /// and current messages, with the tool exchanges they belong to.
    pub fn irreducible(&self) -> Vec<bool> {
        irreducible(self, &exchange_starts(self))
    }
}

/// Where the kept tail starts for `recent` messages before the current one, moved back so
/// that it does not start inside a tool exchange.
pub(crate) fn tail_start(starts: &[usize], recent: usize) -> usize {
    let n = starts.len();
    if n == 0 {
        return 0;
    }
    let mut at = (n - 1).saturating_sub(recent);
    while starts[at] != at {
        at = starts[at];
    }
    at
}

/// The longest tail, at least `min_recent` messages, whose result stays within `target`
/// tokens when the rest of the middle is replaced by a message of `replacement` tokens:
/// ③ cuts to its target in one step instead of throwing away more than it must. `tokens`
/// are the messages' estimates, `fixed` what the request costs besides them (tools).
pub(crate) fn longest_tail(
    starts: &[usize],
    protected: &[bool],
    tokens: &[f64],
    fixed: f64,
    min_recent: usize,
    target: u64,
) -> usize {
    let n = tokens.len();
    if n == 0 {
        return 0;
    }
    // protected_before[i]: the protected messages before i; from[i]: every message from i.
    let mut protected_before = vec![0.0; n + 1];
    for i in 0..n {
        protected_before[i + 1] = protected_before[i] + if protected[i] { tokens[i] } else { 0.0 };
    }
    let mut from = vec![0.0; n + 1];
    for i in (0..n).rev() {
        from[i] = from[i + 1] + tokens[i];
    }
    let mut best = min_recent;
    for recent in min_recent..n {
        let start = tail_start(starts, recent);
        if fixed + protected_before[start] + from[start] > target as f64 {
            break;
        }
        best = recent;
        if start == 0 {
            break;
        }
    }
    best
}

/// The number of a `[context compacted: X earlier messages removed…]` notice.
fn notice_count(message: &Message) -> Option<usize> {
    if message.role() != Role::User {
        return None;
    }
    let text = message.text_content();
    // The marker is the first line; the trail follows it.
    let first = text.lines().next().unwrap_or("");
    let rest = first.strip_prefix("[context compacted: ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let count = digits.parse().ok()?;
    let tail = &rest[digits.len()..];
    (tail == " earlier messages removed]"
        || tail == " earlier messages removed; summary unavailable]")
        .then_some(count)
}

/// Whether a message is a summary the cascade wrote.
pub(crate) fn is_summary(message: &Message) -> bool {
    message.role() == Role::User
        && matches!(message.blocks().first(), Some(Block::Text(t)) if t.text.starts_with(SUMMARY_PREFIX))
}

/// Splits the conversation for a tail of `rules.recent` messages.
pub(crate) fn split(
    conversation: &Conversation,
    starts: &[usize],
    protected: &[bool],
    rules: KeepRules,
) -> Split {
    let n = conversation.messages.len();
    let tail = tail_start(starts, rules.recent);
    let mut fates = vec![Fate::Keep; n];
    let mut insert_at = None;
    let (mut removed, mut removed_before) = (0, 0);
    for index in 0..tail {
        if protected[index] {
            continue;
        }
        let message = &conversation.messages[index];
        let fate = if let Some(count) = notice_count(message) {
            removed_before += count;
            Fate::FoldNotice
        } else if is_summary(message) {
            if rules.summaries == Summaries::Keep {
                continue;
            }
            Fate::PreviousSummary
        } else {
            removed += 1;
            Fate::Remove
        };
        fates[index] = fate;
        insert_at.get_or_insert(index);
    }
    let bridges = match conversation.format {
        Format::Anthropic => bridges(conversation, &fates),
        _ => Vec::new(),
    };
    Split {
        fates,
        insert_at: insert_at.unwrap_or(tail),
        removed,
        removed_before,
        bridges,
    }
}

/// The later gaps of a split whose kept neighbours have the same role (see
/// [`Split::bridges`]), each with the number of ordinary messages it removes.
fn bridges(conversation: &Conversation, fates: &[Fate]) -> Vec<(usize, usize)> {
    let messages = &conversation.messages;
    let side = |i: usize| messages[i].role() == Role::Assistant;
    let mut out = Vec::new();
    let mut first_gap = true;
    let mut i = 0;
    while i < fates.len() {
        if fates[i] == Fate::Keep {
            i += 1;
            continue;
        }
        let start = i;
        while i < fates.len() && fates[i] != Fate::Keep {
            i += 1;
        }
        if std::mem::take(&mut first_gap) {
            continue;
        }
        // What the gap removes, with what the notices folded there had removed before.
        let count: usize = (start..i)
            .map(|k| match fates[k] {
                Fate::Remove => 1,
                Fate::FoldNotice => notice_count(&messages[k]).unwrap_or(0),
                _ => 0,
            })
            .sum();
        if start > 0 && i < fates.len() && side(start - 1) == side(i) {
            out.push((start, count));
        }
    }
    out
}

/// The notice ③ writes in place of the messages it removed.
pub(crate) fn notice_message(removed: usize) -> Message {
    Message::text(Role::User, markers::pruned_notice(removed))
}

/// The message ④ writes: `[context summary]` then the summary.
pub(crate) fn summary_message(body: &str) -> Message {
    Message::text(Role::User, format!("{SUMMARY_PREFIX}\n{}", body.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::parse;

    fn conversation() -> Conversation {
        let body = serde_json::json!({"model": "m", "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "Read", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "Read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "x"},
            {"role": "tool", "tool_call_id": "b", "content": "y"},
            {"role": "user", "content": "[context compacted: 4 earlier messages removed]"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "go"},
        ]});
        parse(body.to_string().as_bytes(), None).unwrap()
    }

    #[test]
    fn results_belong_to_the_assistant_that_called() {
        let c = conversation();
        assert_eq!(exchange_starts(&c), vec![0, 1, 2, 2, 2, 5, 6, 7]);
    }

    #[test]
    fn the_tail_never_starts_inside_an_exchange() {
        let starts = exchange_starts(&conversation());
        assert_eq!(tail_start(&starts, 3), 2);
        assert_eq!(tail_start(&starts, 1), 6);
        assert_eq!(tail_start(&starts, 0), 7);
    }

    #[test]
    fn old_notices_fold_into_the_new_count() {
        let c = conversation();
        let starts = exchange_starts(&c);
        let protected = irreducible(&c, &starts);
        let s = split(&c, &starts, &protected, KeepRules::keeping(1));
        assert_eq!(s.removed, 3);
        assert_eq!(s.removed_before, 4);
        assert_eq!(s.insert_at, 2);
        let mut c2 = c.clone();
        s.apply(&mut c2, notice_message(s.total_removed()));
        assert_eq!(c2.messages.len(), 5);
        assert_eq!(
            c2.messages[2].text_content(),
            "[context compacted: 7 earlier messages removed]"
        );
    }

    #[test]
    fn a_pinned_result_keeps_its_call() {
        let mut c = conversation();
        c.messages[4].pin();
        let starts = exchange_starts(&c);
        let protected = irreducible(&c, &starts);
        assert!(protected[2] && protected[3] && protected[4]);
    }
}
