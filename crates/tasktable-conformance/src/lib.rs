//! The conformance suite: every backend runs every case here, store-level and with the
//! real worker runtime on top, so the backends cannot drift apart.
//!
//! Owns: the cases and the [`Backend`] contract a backend's test file implements (a fresh
//! migrated database per test, extra connections to it, and transactional submit), and
//! [`RowLocks`], which backends with row locks add.
//!
//! Must not know: any particular backend. `tests/<backend>.rs` implements [`Backend`] and
//! expands [`conformance_suite!`] (with `row_locks` when it implements [`RowLocks`]).
//!
//! The cases are split by area, a module each, a file per topic inside it:
//!
//! - [`submit`] — ids and defaults, batches, idempotency keys, transactional submit, values
//!   at the edges of what a task may hold;
//! - [`claim`] — claims and their leases: order and eligibility, attempts and their ends,
//!   one finish for many tasks, what a worker may write, fencing by token and credential,
//!   rescue;
//! - [`operator`] — changes to one task and over a filter, bulk changes in chunks, and
//!   (with [`RowLocks`]) bulk changes beside rows a worker holds;
//! - [`query`] — lists and keyset pages, capped counts, light pages, refused filters;
//! - [`stats`] — throughput and latency per queue and kind, from raw rows and rollups;
//! - [`schedule`] — recurring schedules: saved and refused, fired once per slot by racing
//!   schedulers, across daylight-saving changes, under each missed-slot and overlap policy;
//! - [`retention`] — finished tasks purged by state and age, in batches, deleted or
//!   archived whole, statistics kept;
//! - [`workers`] — the worker registry: heartbeats, drains, silent workers marked gone
//!   and forgotten, queues with work found for workers that take every queue, and why a
//!   pending task waits;
//! - [`policies`] — queue policies: cluster-wide limits per queue and kind, rates per
//!   queue and task key, one task per worker, fair shares of long tasks;
//! - [`targets`] — who may run a task: claims that honour a target and put a worker's own
//!   tasks first, new targets that take a running task from a worker they leave out;
//! - [`runs`] — multi-run tasks: runs by distinct workers, `at_once`, repeats, failures,
//!   each run's lease fenced, rescued and taken over, operators' changes reaching runs;
//! - [`cutoff`] — store calls whose callers are dropped half way: no connection left
//!   inside a transaction, and a shielded store's calls run to their end;
//! - [`runtime`] — the real worker on top of the store;
//! - [`events`] — the event log: operators' changes with their actor and what changed,
//!   tasktable's own, the audit's filters and pages, and the log's retention;
//! - [`schema`] — migrations.
//!
//! A case is an `async fn` whose one parameter is the backend (`db: &impl Backend`, or
//! `db: &impl RowLocks`); [`pinned`] has the store calls the store-level cases share.
//! [`conformance_suite!`] lists every case by its path, `area::file::case`, and expands it
//! into a test in a module named for its area (`claim::stale_token_writes_change_nothing`).
//! This crate's own test `registration` reads its sources and fails, naming the case, when
//! one is written but not listed, or listed under the wrong arm of the macro.

pub mod batches;
pub mod claim;
pub mod cutoff;
pub mod events;
pub mod freeze;
pub mod operator;
pub mod pace;
pub mod pinned;
pub mod policies;
pub mod query;
#[cfg(test)]
mod registration;
pub mod retention;
pub mod runs;
pub mod runtime;
pub mod schedule;
pub mod schema;
pub mod stats;
pub mod submit;
pub mod targets;
pub mod workers;

use futures::future::BoxFuture;
use std::future::Future;
use std::sync::Arc;
use tasktable_core::{NewTask, TaskId};
use tasktable_store::{ChunkedUpdate, Store, StoreResult, Submitted};

/// What a backend's test file provides.
#[async_trait::async_trait]
pub trait Backend: Send + Sync + Sized + 'static {
    /// A fresh, migrated database of its own. `None` when the database server cannot be
    /// reached outside CI: the caller has already printed why. Inside CI (`CI` set) an
    /// unreachable server panics instead, so a missing database never passes as a skip.
    async fn fresh() -> Option<Self>;

    /// A new store (with its own pool) on this test's database.
    async fn store(&self) -> Arc<dyn Store>;

    /// A new store on this test's database whose bulk changes run `rows` rows a chunk, and
    /// the same store as a [`ChunkedUpdate`], to drive its chunks one at a time.
    async fn store_with_bulk_chunk(&self, rows: u32) -> (Arc<dyn Store>, Arc<dyn ChunkedUpdate>);

    /// Opens a transaction on a connection of its own, submits `tasks` inside it, then
    /// commits (`commit`) or rolls back.
    async fn submit_in_transaction(
        &self,
        tasks: Vec<NewTask>,
        commit: bool,
    ) -> StoreResult<Vec<Submitted>>;

    /// A new store on this test's database whose pool holds at most `connections`, as it
    /// is built (not shielded), and a [`Probe`] of that pool.
    async fn store_with_probe(&self, connections: u32) -> (Arc<dyn Store>, Probe);
}

/// Counts the connections of a store's pool that the database holds inside a
/// transaction: it borrows every connection the pool may hold at once (waiting for those
/// in use or on their way back, so it sees the pool at rest), asks the database about
/// each, and closes any that is inside a transaction.
pub type Probe = Box<dyn Fn() -> BoxFuture<'static, usize> + Send + Sync>;

/// What a backend with row locks (PostgreSQL, MySQL) adds: a task's row held from
/// outside the store, as a worker's write in flight holds it. SQLite locks the whole
/// database instead, so its cases show the writer free between chunks.
#[async_trait::async_trait]
pub trait RowLocks: Backend {
    /// Locks task `id` (`SELECT ... FOR UPDATE` in a transaction left open, on a
    /// connection of its own) until [`RowLock::release`].
    async fn lock_row(&self, id: TaskId) -> RowLock;

    /// How many sessions on this test's database wait for a row lock now (on MySQL: have
    /// run one statement for a second or more).
    async fn lock_waiters(&self) -> u64;
}

/// A row lock held from outside the store. Dropped without [`RowLock::release`] (a test
/// that panics), its connection closes and the server rolls the transaction back.
pub struct RowLock(BoxFuture<'static, ()>);

impl RowLock {
    /// `release` ends the transaction that holds the lock.
    pub fn new(release: impl Future<Output = ()> + Send + 'static) -> Self {
        RowLock(Box::pin(release))
    }

    pub async fn release(self) {
        self.0.await
    }
}

impl std::fmt::Debug for RowLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RowLock")
    }
}

pub use tasktable_testdb::unreachable;

/// Expands to one `#[tokio::test]` per case for the backend type `$backend`, in a module
/// per area; with `row_locks`, also the cases that need [`RowLocks`], in `row_locks`.
///
/// Every case is listed here by its path, `area::file::case`. The `registration` test
/// fails when a case is missing, so a new case is added here in the same change.
#[macro_export]
macro_rules! conformance_suite {
    ($backend:ty, row_locks) => {
        $crate::conformance_suite!($backend);
        $crate::conformance_suite!(@area $backend, row_locks, 2;
            operator::row_locks::bulk_change_never_locks_rows_in_states_it_does_not_apply_to,
            operator::row_locks::bulk_change_waits_for_a_row_a_worker_holds_while_other_writes_proceed,
            runtime::saving::items_go_on_while_a_save_waits_for_the_database,
        );
    };
    ($backend:ty) => {
        $crate::conformance_suite!(@area $backend, submit, 2;
            submit::batch::submit_returns_ids_and_applies_defaults,
            submit::batch::a_task_submitted_alone_is_stored_as_in_a_batch,
            submit::batch::submit_rejects_a_bad_batch_and_writes_nothing,
            submit::batch::transactional_submit_commits_and_rolls_back_with_the_caller,
            submit::idempotency::idempotent_submit_returns_the_existing_task,
            submit::idempotency::racing_duplicate_submits_create_exactly_one_task,
            submit::idempotency::lone_submits_at_once_on_one_store_each_get_their_own_task,
            submit::values::names_of_the_longest_length_are_stored_whole,
            submit::values::far_past_and_far_future_run_at_are_stored_alike,
            submit::values::numbers_at_the_ends_of_a_double_come_back_exactly,
        );
        $crate::conformance_suite!(@area $backend, claim, 2;
            claim::order::claim_order_is_priority_then_run_at_then_id,
            claim::order::delayed_tasks_are_not_claimed_early,
            claim::order::claim_takes_only_registered_kinds_of_its_queue,
            claim::order::paused_queue_is_not_claimed_until_resumed,
            claim::attempts::claim_counts_the_attempt_and_grows_the_token,
            claim::attempts::complete_stores_result_and_history,
            claim::attempts::retryable_error_backs_off_then_fails_when_attempts_run_out,
            claim::attempts::snooze_and_interruption_do_not_spend_an_attempt,
            claim::batch::one_finish_call_ends_each_task_by_its_own_item,
            claim::output::worker_output_with_nul_is_stored_alike_everywhere,
            claim::output::payloads_with_nul_and_oversized_results_are_refused,
            claim::fencing::stale_token_writes_change_nothing,
            claim::fencing::checkpoint_and_progress_are_fenced,
            claim::fencing::cancel_of_a_running_task_is_seen_by_its_worker,
            claim::credentials::every_claim_gets_a_credential_of_its_own,
            claim::credentials::writes_with_a_wrong_credential_change_nothing,
            claim::credentials::a_lease_status_tells_the_holder_and_no_one_else,
            claim::rescue::rescue_takes_back_expired_leases_and_counts_the_attempt,
            claim::rescue::rescue_leaves_a_renewed_lease_alone,
            claim::rescue::timeout_caps_the_lease_at_the_deadline,
            claim::rules::a_retry_ends_where_core_says_whatever_max_attempts_becomes_while_running,
        );
        $crate::conformance_suite!(@area $backend, cutoff, 2;
            cutoff::calls::shielded_calls_cut_off_anywhere_leave_the_pool_clean,
            cutoff::calls::a_shielded_call_dropped_after_its_first_poll_still_commits,
            cutoff::calls::a_shielded_claim_whose_caller_went_away_gives_its_tasks_back,
        );
        $crate::conformance_suite!(@area $backend, operator, 2;
            operator::transitions::operator_changes_respect_the_state_machine,
            operator::bulk::bulk_changes_report_how_many_rows_changed,
            operator::chunks::bulk_change_over_many_chunks_changes_every_row_it_applies_to,
            operator::chunks::claims_and_finishes_go_through_between_chunks_of_a_bulk_change,
        );
        $crate::conformance_suite!(@area $backend, query, 2;
            query::list::list_filters_and_pages_by_keyset,
            query::cheap::counts_stop_at_their_cap_and_light_pages_leave_documents_out,
            query::filters::filters_holding_nul_are_refused_on_every_backend,
        );
        $crate::conformance_suite!(@area $backend, stats, 2;
            stats::throughput::stats_count_throughput_and_latency_per_queue_and_kind,
        );
        $crate::conformance_suite!(@area $backend, schedule, 2;
            schedule::crud::schedules_are_saved_read_edited_and_deleted,
            schedule::crud::bad_schedules_are_refused_and_change_nothing,
            schedule::crud::declared_schedules_are_upserted_keeping_an_operators_disable,
            schedule::firing::racing_schedulers_fire_each_slot_exactly_once,
            schedule::firing::edits_take_effect_from_the_next_slot_and_disabled_schedules_fire_nothing,
            schedule::firing::fire_now_submits_at_once_and_leaves_the_slots_alone,
            schedule::policies::each_missed_slot_policy_fires_what_it_says_after_an_outage,
            schedule::policies::overlap_skip_fires_no_slot_while_the_previous_task_is_unfinished,
            schedule::zones::berlin_changes_neither_lose_nor_double_a_slot,
            schedule::zones::new_york_changes_neither_lose_nor_double_a_slot,
        );
        $crate::conformance_suite!(@area $backend, retention, 2;
            retention::purge::purge_takes_each_state_past_its_age_in_batches_and_nothing_else,
            retention::purge::archive_keeps_every_column_and_the_attempts_and_racing_purgers_take_each_once,
            retention::purge::statistics_rolled_up_survive_the_purge,
            retention::purge::a_retainer_sweeps_each_state_of_its_policy_to_the_end,
        );
        $crate::conformance_suite!(@area $backend, workers, 2;
            workers::registry::heartbeats_register_update_and_bring_back_a_worker,
            workers::registry::a_drain_outlives_a_restart_until_released,
            workers::registry::a_workers_standing_is_one_read,
            workers::registry::a_rescuer_marks_silent_workers_gone,
            workers::registry::silent_workers_are_marked_gone_then_forgotten_unless_drained,
            workers::registry::the_registry_counts_what_each_worker_runs,
            workers::registry::bad_worker_facts_are_refused_and_change_nothing,
            workers::ownership::a_worker_id_belongs_to_the_token_that_first_used_it,
            workers::ownership::ids_without_a_token_go_to_the_first_token_unless_in_process,
            workers::ownership::a_token_holds_at_most_its_cap_of_live_workers,
            workers::ownership::the_registry_reads_a_page_at_a_time,
            workers::discovery::discovery_finds_each_queue_with_pending_tasks_once,
            workers::discovery::a_due_check_sees_due_tasks_of_its_kinds_in_queues_not_paused,
            workers::waiting::heartbeats_keep_the_kinds_a_worker_handles_and_an_old_beat_leaves_them_unknown,
            workers::waiting::a_pending_task_says_which_worker_it_lacks_and_a_fitting_worker_ends_it,
            workers::waiting::a_paused_queue_a_target_and_a_later_run_at_are_named,
            workers::waiting::a_limited_queue_at_its_limit_says_so_and_only_pending_tasks_wait,
        );
        $crate::conformance_suite!(@area $backend, targets, 2;
            targets::claim::targeted_tasks_go_only_to_the_workers_they_allow,
            targets::claim::a_worker_takes_its_own_tasks_before_untargeted_ones_of_equal_priority,
            targets::claim::a_worker_takes_its_own_tasks_first_one_claim_at_a_time,
            targets::claim::tasks_waiting_for_an_absent_worker_keep_nothing_from_others,
            targets::claim::a_targeted_task_from_another_store_is_claimed_by_a_polling_worker,
            targets::change::a_new_target_takes_a_running_task_only_from_a_worker_it_leaves_out,
            targets::change::a_group_target_takes_a_task_from_a_worker_the_registry_does_not_know,
            targets::change::waiting_and_finished_tasks_take_a_new_target_and_bad_ones_are_refused,
            targets::affinity::a_retry_waits_for_its_previous_worker_then_goes_to_any,
            targets::affinity::a_retry_stops_waiting_when_its_worker_is_gone,
            targets::affinity::a_retry_keeps_its_own_target_through_the_wait,
            targets::affinity::an_operators_change_ends_the_wait,
        );
        $crate::conformance_suite!(@area $backend, policies, 2;
            policies::limits::a_queue_limit_caps_what_runs_anywhere_and_frees_as_tasks_end,
            policies::limits::a_policy_set_while_a_worker_believes_the_queue_free_binds_its_next_claim,
            policies::limits::a_kind_limit_holds_back_only_its_kind,
            policies::limits::one_per_worker_never_hands_a_worker_a_second_task,
            policies::limits::bad_policies_are_refused_and_change_nothing,
            policies::rates::a_queue_rate_starts_its_burst_then_one_per_interval,
            policies::rates::a_key_rate_holds_back_only_the_key_that_spent_its_tokens,
            policies::shares::ten_long_tasks_over_three_workers_come_out_at_most_four_each_and_rebalance,
            policies::concurrent::limits_and_rates_hold_under_many_concurrent_claimers,
            policies::concurrent::one_per_worker_holds_under_concurrent_claims_of_one_worker,
        );
        $crate::conformance_suite!(@area $backend, runs, 2;
            runs::claim::copies_go_to_that_many_distinct_workers_and_the_nth_success_ends_the_task,
            runs::claim::at_once_caps_the_runs_going_and_a_slot_frees_as_one_ends,
            runs::claim::with_repeat_a_worker_that_finished_takes_it_again,
            runs::claim::failed_runs_past_the_allowance_fail_the_task_and_end_the_runs_going,
            runs::claim::bad_multi_run_requests_are_refused_and_store_nothing,
            runs::broadcast::a_broadcast_runs_once_on_every_active_worker_its_queue_and_target_allow,
            runs::broadcast::a_broadcast_no_worker_would_take_is_refused,
            runs::broadcast::a_joining_broadcast_runs_on_workers_that_join_while_it_is_open,
            runs::leases::writes_under_a_stale_or_forged_run_lease_change_nothing,
            runs::leases::an_expired_run_is_rescued_and_taken_over_from_its_checkpoint_while_others_go_on,
            runs::operator::a_cancel_ends_every_run_going_and_their_workers_hear_it,
            runs::operator::a_retry_of_a_failed_task_clears_its_failed_runs_and_keeps_its_successes,
            runs::operator::a_new_target_applies_to_runs_not_yet_started,
            runs::operator::a_repeated_submit_rearms_a_multi_run_task_only_when_asked,
        );
        $crate::conformance_suite!(@area $backend, batches, 2;
            batches::save::a_save_keeps_progress_renews_the_lease_and_answers_control,
            batches::save::a_save_under_a_stale_or_forged_lease_changes_nothing,
            batches::save::failed_items_are_kept_up_to_the_cap,
            batches::save::a_paused_runner_gives_its_batch_back_held_without_spending_an_attempt,
            batches::control::a_held_batch_waits_for_its_start_and_each_action_applies_where_it_may,
            batches::control::a_waiting_batch_waits_through_pause_stop_and_resume_until_its_start,
            batches::control::the_budget_changes_any_time_and_the_data_only_while_waiting_or_serial,
            batches::control::retention_archives_a_batch_with_its_task,
        );
        $crate::conformance_suite!(@area $backend, events, 2;
            events::audit::task_changes_are_recorded_with_their_actor_and_what_they_changed,
            events::audit::refused_changes_record_nothing,
            events::audit::a_task_keeps_who_submitted_it,
            events::audit::queue_worker_and_schedule_changes_are_recorded,
            events::retention::a_tasks_events_are_deleted_or_archived_with_it_and_the_rest_pruned_by_age,
            events::feed::a_follower_sees_submits_attempts_and_events_once_and_resumes_without_a_gap,
            events::feed::a_row_that_commits_after_the_cursor_passed_its_id_is_still_given_out,
            events::logs::a_tasks_log_is_fenced_capped_cut_and_archived_with_it,
        );
        $crate::conformance_suite!(@area $backend, schema, 2;
            schema::migrate::migrate_is_idempotent_and_safe_concurrently,
        );
        $crate::conformance_suite!(@area $backend, runtime, 4;
            runtime::batches::every_index_runs_once_and_failed_items_spend_the_budget,
            runtime::batches::an_exhausted_budget_fails_the_batch_with_its_offset_kept,
            runtime::batches::an_open_ended_batch_ends_where_its_handler_says,
            runtime::batches::the_rate_limit_holds_within_the_buckets_burst,
            runtime::batches::a_pause_and_a_stop_are_seen_within_two_seconds_and_a_resume_goes_on,
            runtime::batches::a_shutdown_winds_a_batch_down_and_the_next_worker_repeats_nothing,
            runtime::batches::the_prestart_hook_has_its_own_timeout,
            runtime::batches::a_frozen_worker_is_taken_over_repeating_at_most_the_window,
            runtime::drain::four_workers_run_each_of_2000_tasks_exactly_once,
            runtime::drain::claims_run_ahead_of_a_stalled_completer_within_their_bound,
            runtime::drain::tasks_claimed_ahead_behind_a_slow_handler_go_back_unspent,
            runtime::takeover::frozen_worker_loses_its_task_to_one_that_resumes_from_the_checkpoint,
            runtime::takeover::a_task_claimed_again_keeps_its_new_lease_while_the_old_attempt_ends,
            runtime::leases::timeouts_count_attempts_and_end_failed,
            runtime::leases::lease_expiry_is_rescued_with_the_attempt_counted,
            runtime::leases::graceful_shutdown_releases_without_spending_an_attempt,
            runtime::outcomes::panicking_handler_fails_only_its_attempt,
            runtime::outcomes::handler_outcomes_move_tasks_as_documented,
            runtime::outcomes::a_handlers_log_lines_join_its_tasks_history,
            runtime::outcomes::cancelling_a_running_task_signals_its_handler,
            runtime::queues::concurrency_limits_are_never_exceeded,
            runtime::queues::a_queue_policy_limits_every_worker_together,
            runtime::queues::paused_queue_stops_workers_and_resume_restarts_them,
            runtime::queues::idle_worker_wakes_on_submit_without_waiting_for_a_poll,
            runtime::refusal::one_refused_result_never_sends_other_tasks_back,
            runtime::runs::six_copies_run_on_six_members_of_the_group_never_more_than_three_at_once,
            runtime::runs::a_frozen_run_is_taken_over_from_its_checkpoint_while_the_other_run_goes_on,
            runtime::schedules::workers_save_declared_schedules_and_fire_each_slot_once,
            runtime::workers::a_drained_worker_claims_nothing_new_even_after_a_restart_until_released,
            runtime::workers::a_worker_taking_every_queue_runs_tasks_of_queues_it_was_never_told_of,
            runtime::targets::targeted_tasks_run_only_on_the_workers_they_allow,
            runtime::targets::a_new_target_stops_the_running_handler_without_spending_an_attempt,
            runtime::targets::a_retry_runs_again_on_the_worker_that_ran_it,
            runtime::targets::a_retry_goes_elsewhere_once_its_worker_is_gone,
        );
    };
    (@area $backend:ty, $module:ident, $threads:tt;
        $($area:ident :: $file:ident :: $case:ident),* $(,)?) => {
        mod $module {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
                async fn $case() {
                    if let Some(db) = <$backend as $crate::Backend>::fresh().await {
                        $crate::$area::$file::$case(&db).await;
                    }
                }
            )*
        }
    };
}
