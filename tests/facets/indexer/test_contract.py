"""facets_indexer.contract: the JSON shape of a repo.indexer task's status."""

from __future__ import annotations

import msgspec
import pytest

from facets_indexer.contract import INDEXER_KIND, IndexerStatus


def test_status_round_trips_as_the_documented_json_shape() -> None:
    status = IndexerStatus("writing", files_total=120, files_indexed=64, batches_done=1)
    raw = msgspec.json.encode(status)
    assert msgspec.json.decode(raw) == {
        "stage": "writing",
        "files_total": 120,
        "files_indexed": 64,
        "batches_done": 1,
    }
    assert msgspec.json.decode(raw, type=IndexerStatus) == status
    assert INDEXER_KIND == "repo.indexer"


@pytest.mark.parametrize(
    "raw",
    [b'{"stage": "sleeping"}', b'{"stage": "done", "files": 3}', b'{"files_total": 1}'],
)
def test_status_rejects_unknown_stages_and_fields(raw: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(raw, type=IndexerStatus)
