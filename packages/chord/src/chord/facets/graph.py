"""The service graph of one facet generation: who provides what, and who activates first.

Every facet's ``setup`` leaves a ledger of provisions and requirements
(:class:`~chord.facets.environment.FacetRecord`). :func:`activation_order` checks it, in an order
that makes the first problem the one reported:

1. **Provider table.** Services offered by the host's sources come first (their owner is "the
   host"), then each facet's provisions. A second provision of one id is an error naming both
   owners, or saying the two provisions disagree on singleton versus keyed.
2. **Requirements.** Each must have a provider (``"Facet <F> requires local/<id>/<mode>, but no
   facet provides it"``) in the same mode. Using one's own provision adds no edge.
3. **Order.** Kahn's algorithm over consumer→provider edges: facets without dependencies first, in
   input order, then each dependent as soon as its last provider is placed. Whatever cannot be
   placed is reported as a cycle, in input order; that includes facets merely downstream of it.

Providers therefore activate before their consumers, and disposal runs the order in reverse.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from chord.facets.environment import FacetRecord
from chord.services import ServiceMode

__all__ = ["activation_order"]


def activation_order(
    records: Sequence[FacetRecord], external: Mapping[str, ServiceMode] | None = None
) -> list[str]:
    """Validate one generation's service graph and return its activation order (facet ids).

    ``external`` maps the ids of services supplied by the host's sources to their modes. Raises
    ``RuntimeError`` naming the facets for a duplicate provider, a singleton/keyed mismatch, a
    missing provider or a cycle.
    """
    providers: dict[str, tuple[str | None, ServiceMode]] = {
        service_id: (None, mode) for service_id, mode in (external or {}).items()
    }
    for record in records:
        for provision in record.provides:
            service_id = provision.service.id
            existing = providers.get(service_id)
            if existing is not None:
                owner, mode = existing
                if mode != provision.mode:
                    raise RuntimeError(
                        f"Service {service_id} is provided as both singleton and keyed"
                    )
                if owner is None:
                    raise RuntimeError(
                        f"Service {service_id} is provided by both the host and {record.id}"
                    )
                raise RuntimeError(
                    f"Service {service_id} is provided by both {owner} and {record.id}"
                )
            providers[service_id] = (record.id, provision.mode)

    dependencies: dict[str, set[str]] = {record.id: set() for record in records}
    dependents: dict[str, list[str]] = {record.id: [] for record in records}
    for record in records:
        for requirement in record.requires:
            service_id = requirement.service.id
            provider = providers.get(service_id)
            if provider is None:
                if service_id in record.optional:  # observed optionally: zero instances
                    continue
                raise RuntimeError(
                    f"Facet {record.id} requires local/{service_id}/{requirement.mode}, "
                    "but no facet provides it"
                )
            owner, mode = provider
            if mode != requirement.mode:
                raise RuntimeError(
                    f"Facet {record.id} requires {service_id} as {requirement.mode}, but "
                    f"{owner if owner is not None else 'the host'} provides it as {mode}"
                )
            if owner is None or owner == record.id or owner in dependencies[record.id]:
                continue
            dependencies[record.id].add(owner)
            dependents[owner].append(record.id)

    remaining = {facet_id: len(needs) for facet_id, needs in dependencies.items()}
    ready = deque(record.id for record in records if remaining[record.id] == 0)
    order: list[str] = []
    while ready:
        facet_id = ready.popleft()
        order.append(facet_id)
        for dependent in dependents[facet_id]:
            remaining[dependent] -= 1
            if remaining[dependent] == 0:
                ready.append(dependent)
    if len(order) != len(records):
        stuck = [record.id for record in records if remaining[record.id] > 0]
        raise RuntimeError(f"Facet dependency cycle: {', '.join(stuck)}")
    return order
