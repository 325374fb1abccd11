//! A small realistic agent conversation with a tree of forks, for `forktrail demo`,
//! the README and the tests.

use crate::error::Result;
use crate::model::{ForkOptions, Kind, NewSession, NewTurn, Role, SessionId};
use crate::store::Store;

/// The sessions [`build`] created.
#[derive(Clone, Debug)]
pub struct DemoTree {
    /// The root conversation (branch `main`).
    pub root: SessionId,
    /// A fork that explores a cheaper option (branch `budget`).
    pub budget: SessionId,
    /// A fork that regenerates the answer with another model (branch `model-swap`).
    pub model_swap: SessionId,
    /// A fork of `model_swap` (depth 2) that books the train (branch `booking`).
    pub booking: SessionId,
}

/// The model of the root conversation.
pub const MODEL_A: &str = "qwen2.5-7b-instruct";
/// The model the `model-swap` branch continues with.
pub const MODEL_B: &str = "llama-3.1-8b-instruct";

fn fork(
    store: &Store,
    parent: &SessionId,
    at: u64,
    label: &str,
    reason: &str,
) -> Result<SessionId> {
    let plan = store.fork(
        parent,
        ForkOptions {
            at: Some(at),
            label: Some(label.into()),
            reason: Some(reason.into()),
            ..ForkOptions::default()
        },
    )?;
    Ok(plan.session)
}

/// Builds the demo tree in `store` (fresh ids each time, so it can run twice).
///
/// ```
/// let store = forktrail::Store::in_memory()?;
/// let tree = forktrail::demo::build(&store)?;
/// assert_eq!(store.info(&tree.booking)?.depth, 2);
/// # Ok::<(), forktrail::Error>(())
/// ```
pub fn build(store: &Store) -> Result<DemoTree> {
    let root = store.create_session(NewSession {
        title: Some("Paris to Amsterdam by train".into()),
        principal: Some("alice".into()),
        ..NewSession::default()
    })?;
    let say = |s: &SessionId, role: Role, text: &str| store.append(s, NewTurn::new(role, text));
    let answer = |s: &SessionId, text: &str, model: &str| {
        store.append(s, NewTurn::new(Role::Assistant, text).model(model))
    };
    say(
        &root,
        Role::System,
        "You are a travel assistant. Use tools when facts may have changed.",
    )?;
    say(
        &root,
        Role::User,
        "Is it worth taking the train from Paris to Amsterdam next Friday?",
    )?;
    store.append(
        &root,
        NewTurn::new(Role::Assistant, "Let me check the timetable.")
            .kind(Kind::ToolCall)
            .model(MODEL_A)
            .tool_calls(r#"[{"id":"call_1","type":"function","function":{"name":"search_trains","arguments":"{\"from\":\"Paris\",\"to\":\"Amsterdam\",\"day\":\"friday\"}"}}]"#),
    )?;
    store.append(
        &root,
        NewTurn::new(
            Role::Tool,
            r#"{"departures":["07:25","10:25","13:25"],"duration":"3h18","fares_eur":[49,79,115]}"#,
        )
        .name("search_trains")
        .tool_call_id("call_1"),
    )?;
    answer(
        &root,
        "Yes: direct trains take about 3h20, from 49 EUR if you leave at 07:25.",
        MODEL_A,
    )?;
    say(&root, Role::User, "And if I must arrive by 11:00?")?;
    answer(&root, "Take the 07:25; it arrives at 10:43.", MODEL_A)?;

    let budget = fork(store, &root, 5, "budget", "explore a cheaper option")?;
    say(
        &budget,
        Role::User,
        "Is there anything cheaper than the train?",
    )?;
    answer(
        &budget,
        "Night buses start at 25 EUR but take about 8 hours.",
        MODEL_A,
    )?;

    let model_swap = fork(
        store,
        &root,
        4,
        "model-swap",
        "regenerate the answer with another model",
    )?;
    answer(
        &model_swap,
        "Direct trains leave at 07:25, 10:25 and 13:25; the 07:25 is cheapest at 49 EUR.",
        MODEL_B,
    )?;
    say(
        &model_swap,
        Role::User,
        "Great, book the 07:25 for two adults.",
    )?;

    let booking = fork(store, &model_swap, 6, "booking", "book the chosen train")?;
    store.append(
        &booking,
        NewTurn::new(Role::Assistant, "Booking two seats.")
            .kind(Kind::ToolCall)
            .model(MODEL_B)
            .tool_calls(r#"[{"id":"call_2","type":"function","function":{"name":"book_train","arguments":"{\"departure\":\"07:25\",\"adults\":2}"}}]"#),
    )?;
    store.append(
        &booking,
        NewTurn::new(
            Role::Tool,
            r#"{"status":"confirmed","reference":"PA-4521","total_eur":98}"#,
        )
        .name("book_train")
        .tool_call_id("call_2"),
    )?;
    answer(
        &booking,
        "Booked: reference PA-4521, 98 EUR for two adults on the 07:25.",
        MODEL_B,
    )?;
    Ok(DemoTree {
        root,
        budget,
        model_swap,
        booking,
    })
}
