"""Information path selection (§3.1.2, Eq. 5): score_l = sum over the nodes of the root-to-leaf
path of |D_s| (positive documents + distractors); keep the m best paths."""

from __future__ import annotations

from agentrag.synth.ragshaper.schema import InfoTree, PathRecord, TreeNode


def root_to_leaf_paths(tree: InfoTree) -> list[list[TreeNode]]:
    """Every path from the root to a leaf, in depth-first (creation) order of the leaves."""
    by_id = {n.id: n for n in tree.nodes}
    parents = {n.parent for n in tree.nodes if n.parent is not None}
    paths = []
    for leaf in tree.nodes:
        if leaf.id in parents or leaf.parent is None:
            continue
        path = [leaf]
        while path[-1].parent is not None:
            path.append(by_id[path[-1].parent])
        paths.append(path[::-1])
    return paths


def path_score(path: list[TreeNode]) -> int:
    """Eq. 5: the number of documents on the path."""
    return sum(len(n.docs) for n in path)


def select_paths(tree: InfoTree, m: int) -> list[PathRecord]:
    """The ``m`` highest-scoring root-to-leaf paths (ties: the earlier leaf wins)."""
    paths = root_to_leaf_paths(tree)
    ranked = sorted(enumerate(paths), key=lambda ip: (-path_score(ip[1]), ip[0]))[:m]
    return [PathRecord(id=f"{tree.id}-{p[-1].id}", seed_id=tree.id, seed=tree.seed,
                       node_ids=[n.id for n in p], score=path_score(p), rank=rank)
            for rank, (_, p) in enumerate(ranked)]


__all__ = ["root_to_leaf_paths", "path_score", "select_paths"]
