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
    // An assistant turn that calls tools (`calls`, as JSON), and a tool's result.
    let call = |s: &SessionId, text: &str, model: &str, calls: &str| {
        let turn = NewTurn::new(Role::Assistant, text).kind(Kind::ToolCall);
        store.append(s, turn.model(model).tool_calls(calls))
    };
    let result = |s: &SessionId, tool: &str, call_id: &str, json: &str| {
        store.append(
            s,
            NewTurn::new(Role::Tool, json)
                .name(tool)
                .tool_call_id(call_id),
        )
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
    call(
        &root,
        "Let me check the timetable.",
        MODEL_A,
        r#"[{"id":"call_1","type":"function","function":{"name":"search_trains","arguments":"{\"from\":\"Paris\",\"to\":\"Amsterdam\",\"day\":\"friday\"}"}}]"#,
    )?;
    result(
        &root,
        "search_trains",
        "call_1",
        r#"{"departures":["07:25","10:25","13:25"],"duration":"3h18","fares_eur":[49,79,115]}"#,
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
    call(
        &booking,
        "Booking two seats.",
        MODEL_B,
        r#"[{"id":"call_2","type":"function","function":{"name":"book_train","arguments":"{\"departure\":\"07:25\",\"adults\":2}"}}]"#,
    )?;
    result(
        &booking,
        "book_train",
        "call_2",
        r#"{"status":"confirmed","reference":"PA-4521","total_eur":98}"#,
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
