"""kafka-python's own offset reset reports the offsets it skips because they were deleted
(:func:`~streambayes.runtime.kafka.kafka_python.report_resets_past_deleted`), on the client's
real subscription state and reset step (no broker)."""

from __future__ import annotations

import types

from kafka import TopicPartition
from kafka.consumer.fetcher import Fetcher
from kafka.consumer.subscription_state import OffsetResetStrategy, SubscriptionState

from streambayes.runtime.kafka import kafka_python

TP = TopicPartition("ev", 3)


def client(position: int | None = 10):
    subscription = SubscriptionState(offset_reset_strategy="earliest")
    subscription.assign_from_user([TP])
    if position is not None:
        subscription.seek(TP, position)  # the group's committed offset, as the client seeks it
    fetcher = types.SimpleNamespace(_subscriptions=subscription)
    fetcher._reset_offset_if_needed = types.MethodType(Fetcher._reset_offset_if_needed, fetcher)
    consumer = types.SimpleNamespace(_subscription=subscription, _fetcher=fetcher)
    found: list[tuple[int, int, int]] = []
    assert kafka_python.report_resets_past_deleted(consumer, lambda *a: found.append(a))
    return subscription, fetcher, found


def test_a_reset_past_an_offset_found_out_of_range_reports_the_offsets_deleted():
    subscription, fetcher, found = client(10)
    subscription.request_offset_reset(TP)  # the fetch found offset 10 out of range
    fetcher._reset_offset_if_needed(TP, OffsetResetStrategy.EARLIEST, 250)  # ListOffsets: 250
    assert found == [(3, 10, 250)]
    assert subscription.assignment[TP].position.offset == 250  # the client's own reset stands


def test_explicit_seeks_resets_below_the_offset_and_abandoned_resets_report_nothing():
    subscription, fetcher, found = client(10)
    subscription.request_offset_reset(TP, OffsetResetStrategy.EARLIEST)  # seek_to_beginning
    fetcher._reset_offset_if_needed(TP, OffsetResetStrategy.EARLIEST, 250)
    subscription.seek(TP, 400)
    subscription.request_offset_reset(TP)  # out of range past the end (a truncated log) ...
    fetcher._reset_offset_if_needed(TP, OffsetResetStrategy.EARLIEST, 300)  # ... back to 300
    assert found == []
    subscription.seek(TP, 10)
    subscription.request_offset_reset(TP)
    subscription.seek(TP, 20)  # the user seeks meanwhile: the client skips its reset
    fetcher._reset_offset_if_needed(TP, OffsetResetStrategy.EARLIEST, 250)
    assert found == [] and subscription.assignment[TP].position.offset == 20


def test_a_mark_left_by_a_partition_revoked_before_its_reset_is_not_a_later_ones():
    subscription, fetcher, found = client(10)
    subscription.request_offset_reset(TP)  # out of range, then revoked before the ListOffsets
    subscription.assign_from_user([])
    subscription.assign_from_user([TP])  # given back, no committed offset: the policy's reset
    subscription.reset_missing_positions()
    fetcher._reset_offset_if_needed(TP, OffsetResetStrategy.EARLIEST, 250)
    assert found == [] and subscription.assignment[TP].position.offset == 250


def test_a_reset_to_the_end_skips_by_the_users_choice_and_is_not_reported():
    subscription, fetcher, found = client(10)
    subscription._default_offset_reset_strategy = OffsetResetStrategy.LATEST
    subscription.request_offset_reset(TP)
    fetcher._reset_offset_if_needed(TP, OffsetResetStrategy.LATEST, 900)
    assert found == [] and subscription.assignment[TP].position.offset == 900


def test_a_partition_without_a_position_has_nothing_to_report():
    subscription, fetcher, found = client(None)  # no committed offset: the policy's first reset
    subscription.request_offset_reset(TP)
    fetcher._reset_offset_if_needed(TP, OffsetResetStrategy.EARLIEST, 250)
    assert found == [] and subscription.assignment[TP].position.offset == 250


def test_a_client_without_those_parts_is_left_alone():
    consumer = types.SimpleNamespace(_subscription=None, _fetcher=None)
    assert not kafka_python.report_resets_past_deleted(consumer, lambda *a: None)
