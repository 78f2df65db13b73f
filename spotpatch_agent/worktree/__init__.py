"""Git isolation for jobs (docs/design.md §8), read in the order a job walks it.

Each module does one thing and is imported by its own name (no re-exports here: importing one module, e.g.
``worktree.sweep`` to start serving, imports only what it needs)::

    before     repo.py, refs.py            repository facts: HEAD, layout, git operations in progress
               health.py, health_details.py  RepoHealth, the blocked message, each reason's paths and fix
               lock.py                     the cross-engine write lock
               gitdir_files.py             <git-dir>/spotpatch/… opened without following a symlink
    create     placement.py                where a job directory lives; the Worktree record
               sidecar.py, marker.py       who owns a worktree (sidecar before it exists, marker after)
               create.py                   worktree add (or pool.py's warm checkout) → marker → baseline commit
               snapshot.py                 include-local-changes: the user's changes copied into the baseline
               pool.py                     the warm worktree pool
               pool_state.py, pool_proof.py  its state; the read-only proofs about one pooled worktree
    work       (the file tools write in the worktree; tools/ owns that)
    validate   result.py                   stage, the result diff, git's raw diff parsed
               validate.py, checkout_form.py  changeset validation; Apply writes the bytes the diff shows
    apply/     hashes.py                   the touched paths' SHA-256 hashes, baseline and result
    revert     changes.py                  apply_change and revert_change
               change_plan.py              what they will write: the record, the checks, post-images, plans
               patch_images.py             post-images from the diff's hunks
               images.py, image_write.py   reading file images; writing one atomically, a racing save kept
               dirfd.py                    directory descriptors and no-replace renames under both
    journal    journal.py, recovery.py     the crash journal, and its repair at the next start
    sweep      removal.py                  remove a worktree, or move it aside into the trash
               sweep.py                    the start-up sweep of orphans a crash left

Every git command of this package goes through :mod:`spotpatch_agent.worktree.git`, its front of the
package's one git runner (:mod:`spotpatch_agent.git_runner`).
"""
