"""The Pinecone fake's index: the data-plane operations on its vectors.

`IndexData` is the half of `FakePinecone` (harness/pinecone_fake.py) that upserts,
queries, fetches, deletes, lists and counts the stored vectors; `FakePinecone` adds the
transport, the faults, the eventual consistency and the control plane.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import unquote

import httpx
import numpy as np

from harness.pinecone_filters import matches
from harness.pinecone_requests import BATCH_MAX
from harness.pinecone_requests import DEFAULT_NAMESPACE
from harness.pinecone_requests import LIST_LIMIT_DEFAULT
from harness.pinecone_requests import LIST_LIMIT_MAX
from harness.pinecone_requests import TOP_K_MAX
from harness.pinecone_requests import TOP_K_MAX_WITH_DATA
from harness.pinecone_requests import VECTOR_KEYS
from harness.pinecone_requests import Namespaces
from harness.pinecone_requests import Record
from harness.pinecone_requests import Rejected
from harness.pinecone_requests import RequestRules
from harness.pinecone_requests import ascii_name
from harness.pinecone_requests import f32
from harness.pinecone_requests import flag
from harness.pinecone_requests import raw_path


class IndexData(RequestRules):
    """Data-plane handlers; state, `clock` and `_commit` come from FakePinecone."""

    dimension: int
    metric: str
    strip_null_metadata: bool
    missing_namespace_delete_status: int
    _committed: Namespaces

    # --- data plane -----------------------------------------------------------------------

    def _upsert(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        body = self._json_object(request)
        ns, vectors = self._namespace(body.get("namespace")), body.get("vectors")
        if not isinstance(vectors, list):
            raise Rejected("vectors must be an array")
        if len(vectors) > BATCH_MAX:
            raise Rejected(f"Upsert of {len(vectors)} vectors exceeds the limit of {BATCH_MAX}")
        rows: list[tuple[str, Record]] = []
        for item in vectors:
            if not isinstance(item, dict) or not item.keys() <= VECTOR_KEYS:
                raise Rejected(f"Invalid vector: {str(item)[:80]}")
            vid = ascii_name(item.get("id"), "Vector ID")
            if "sparseValues" in item and self.metric != "dotproduct":
                raise Rejected("Sparse vector values are only supported for the dotproduct metric")
            values = self._dense(item.get("values"), "Vector")
            sparse = (
                self._sparse(item["sparseValues"], "Sparse values")
                if "sparseValues" in item
                else None
            )
            rows.append((vid, (values, self._metadata(item.get("metadata"), vid), sparse)))

        def apply(state: Namespaces) -> None:
            state.setdefault(ns, {}).update(rows)

        return {"upsertedCount": len(rows)}, self._commit(apply)

    def _score(self, a: list[float], b: list[float]) -> float:
        x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if self.metric == "euclidean":  # squared distance; lower is closer
            return float(np.sum((x - y) ** 2))
        dot = float(x @ y)
        return (
            dot / float(np.linalg.norm(x) * np.linalg.norm(y)) if self.metric == "cosine" else dot
        )

    def _query(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        body = self._json_object(request)
        top_k, with_values = body.get("topK"), flag(body, "includeValues")
        with_meta = flag(body, "includeMetadata")
        if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= TOP_K_MAX:
            raise Rejected(f"topK must be an integer between 1 and {TOP_K_MAX}, got {top_k!r}")
        if (with_values or with_meta) and top_k > TOP_K_MAX_WITH_DATA:
            raise Rejected(
                f"top_k must be at most {TOP_K_MAX_WITH_DATA} when include_values or "
                f"include_metadata is true, got {top_k}"
            )
        ns, flt = self._namespace(body.get("namespace")), self._filter(body.get("filter"))
        if "vector" in body and "id" in body:
            raise Rejected("Cannot provide both 'ID' and 'vector' at the same time")
        if "sparseVector" in body and self.metric != "dotproduct":
            raise Rejected("Sparse vector queries are only supported for the dotproduct metric")
        records = self._visible().get(ns, {})
        if "id" in body:
            found = records.get(ascii_name(body["id"], "id"))
            target = found[0] if found else None
        elif "vector" in body:
            target = self._dense(body["vector"], "Query vector")
        else:
            raise Rejected("No query provided: pass vector or id")
        query_sparse = (
            self._sparse(body["sparseVector"], "Sparse query") if "sparseVector" in body else {}
        )

        def score(values: list[float], sparse: dict[int, float] | None) -> float:
            assert target is not None
            keyword = sum(w * (sparse or {}).get(i, 0.0) for i, w in query_sparse.items())
            return self._score(target, values) + keyword

        scored = [
            (score(values, sparse), vid, values, meta)
            for vid, (values, meta, sparse) in records.items()
            if target is not None and (flt is None or matches(flt, meta))
        ]
        sign = 1.0 if self.metric == "euclidean" else -1.0
        scored.sort(key=lambda s: (sign * s[0], s[1]))
        found_matches = []
        for score, vid, values, meta in scored[:top_k]:
            match: dict[str, Any] = {"id": vid, "score": f32([score])[0]}
            match["values"] = values if with_values else []
            if with_meta and meta:
                match["metadata"] = meta
            found_matches.append(match)
        reply = {
            "matches": found_matches,
            "namespace": body.get("namespace", ""),
            "usage": {"readUnits": 1},
        }
        return reply, {"x-pinecone-max-indexed-lsn": str(self.reconciled_lsn)}

    def _fetch(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        params = request.url.params
        ids = self._ids(params.get_list("ids") or None)
        records = self._visible().get(self._namespace(params.get("namespace")), {})
        vectors: dict[str, Any] = {}
        for vid in ids:
            if vid in records:
                values, meta, _ = records[vid]
                vectors[vid] = {"id": vid, "values": values, **({"metadata": meta} if meta else {})}
        reply = {
            "vectors": vectors,
            "namespace": params.get("namespace", ""),
            "usage": {"readUnits": 1},
        }
        return reply, {}

    def _update(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        """By id, `setMetadata` only (what the plugin sends): its fields merged into the
        record's; an id the namespace does not hold changes nothing and answers 200."""
        body = self._json_object(request)
        ns, vid = self._namespace(body.get("namespace")), ascii_name(body.get("id"), "Vector ID")
        changes = self._metadata(body.get("setMetadata"), vid) or {}

        def apply(state: Namespaces) -> None:
            records = state.get(ns, {})
            if vid in records:
                values, meta, sparse = records[vid]
                records[vid] = (values, {**(meta or {}), **changes}, sparse)

        return {}, self._commit(apply)

    def _delete(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        body = self._json_object(request)
        ns, delete_all = self._namespace(body.get("namespace")), flag(body, "deleteAll")
        if delete_all and ("ids" in body or "filter" in body):
            raise Rejected("No explicit IDs or filter allowed when deleteAll is true")
        flt = self._filter(body.get("filter"), "Delete with empty metadata filter is not allowed")
        ids = self._ids(body["ids"]) if "ids" in body and flt is None else None
        if not (delete_all or flt or ids):
            raise Rejected("Must specify one of ids, deleteAll or filter")

        def apply(state: Namespaces) -> None:  # filters are evaluated when the write applies
            records = state.get(ns)
            if records is None:
                return
            doomed = (
                list(records)
                if delete_all
                else ids
                or [vid for vid, (_, meta, _) in records.items() if flt and matches(flt, meta)]
            )
            for vid in doomed:
                records.pop(vid, None)

        return {}, self._commit(apply)

    def _list(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        params = request.url.params
        prefix = ascii_name(params.get("prefix", ""), "prefix", allow_empty=True)
        raw_limit = params.get("limit", str(LIST_LIMIT_DEFAULT))
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= LIST_LIMIT_MAX:
            raise Rejected(f"limit must be between 1 and {LIST_LIMIT_MAX}, got {raw_limit!r}")
        after = ""
        if "paginationToken" in params:
            try:
                after = json.loads(base64.urlsafe_b64decode(params["paginationToken"]))["after"]
            except (ValueError, KeyError, TypeError) as exc:
                raise Rejected("Invalid pagination token") from exc
        records = self._visible().get(self._namespace(params.get("namespace")), {})
        ids = sorted(v for v in records if v.startswith(prefix) and v > after)
        page = ids[: int(raw_limit)]
        reply: dict[str, Any] = {
            "vectors": [{"id": vid} for vid in page],
            "namespace": params.get("namespace", ""),
            "usage": {"readUnits": 1},
        }
        if len(ids) > len(page):
            token = base64.urlsafe_b64encode(json.dumps({"after": page[-1]}).encode()).decode()
            reply["pagination"] = {"next": token}
        return reply, {}

    def _stats(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        if self._json_object(request).get("filter"):
            raise Rejected("Serverless indexes do not support describing index stats with a filter")
        counts = {ns: len(recs) for ns, recs in self._visible().items() if recs}
        reply = {
            "namespaces": {ns: {"vectorCount": n} for ns, n in sorted(counts.items())},
            "dimension": self.dimension,
            "indexFullness": 0.0,
            "totalVectorCount": sum(counts.values()),
            "metric": self.metric,
            "vectorType": "dense",
        }
        return reply, {}

    def _delete_namespace(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        ns = ascii_name(unquote(raw_path(request).removeprefix("/namespaces/")), "namespace")
        if ns not in self._committed and ns != DEFAULT_NAMESPACE:
            raise Rejected(f"Namespace {ns} not found", self.missing_namespace_delete_status)

        def apply(state: Namespaces) -> None:
            state.pop(ns, None)

        return {}, self._commit(apply)
