"""Permuted MNIST: a new pixel permutation (task) every 300 rows (LO-FI paper Sec. 4.1).

The LO-FI paper (Chang et al., 2023, Sec. 4.1, Fig. 1c, App. D.4) streams permuted
Fashion-MNIST: every 300 training rows the images are permuted afresh, 10 tasks, task
boundaries unknown to the learner, and plots the misclassification rate on the *current*
task's test set (500 rows per task) against the number of rows seen. Here, on MNIST
(the test set only; see ``_nonstationary``), 14 x 14 pooled:

* stream (one per seed): 10 tasks x 300 rows; task k permutes the 196 pixels by its own
  random permutation and draws its 300 training rows, distinct across tasks, from the
  3,500-row training pool of the *report* half; its 300 test rows come from that half's
  1,500-row test pool (an image may serve several tasks, each time permuted differently);
* evaluation, tuning on a validation stream from the disjoint *tune* half, and the report:
  :func:`_nonstationary.task_benchmark`;
* methods: ``BONGClassifier`` (MLP 196-50-10) on the DLR family (LO-FI, rank 10) with
  static weights and with the random-walk dynamics (``process_noise``,
  ``dynamics_decay``), the diagonal family (VD-EKF) with dynamics,
  ``SGDClassifier(loss="log_loss")`` and ``MLPClassifier(50)`` with Adam.

Writes ``results/permuted_mnist.{md,png,json}``.

    python benchmarks/permuted_mnist.py [--seeds 5] [--quick]
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import SGDClassifier
from sklearn.neural_network import MLPClassifier

from _nonstationary import Method, TaskBenchmark, TaskStream, task_benchmark
from skbong import BONGClassifier

TASKS, TASK_ROWS, TEST_ROWS, TEST_POOL = 10, 300, 300, 1500
HIDDEN = (50,)


def bong(seed, **hp):
    return BONGClassifier(hidden_layer_sizes=HIDDEN, family="dlr", rank=10, random_state=seed, **hp)


def bong_diag(seed, **hp):
    return BONGClassifier(hidden_layer_sizes=HIDDEN, family="diag", random_state=seed, **hp)


def sgd(seed, **hp):
    return SGDClassifier(loss="log_loss", learning_rate="constant", shuffle=False, random_state=seed, **hp)


def mlp(seed, **hp):
    return MLPClassifier(hidden_layer_sizes=HIDDEN, solver="adam", batch_size=1, shuffle=False,
                         random_state=seed, **hp)


DYNAMICS = {"sigma0": (0.1, 0.3, 1.0), "process_noise": (1e-6, 1e-5, 1e-4, 1e-3), "dynamics_decay": (1.0, 0.9999)}

#: label -> Method (factory, grid tuned on the validation stream). A new drift option of the
#: estimators is one more entry.
METHODS = {
    "BONG DLR-10 static": Method(bong, {"sigma0": (0.03, 0.1, 0.3, 1.0)}),
    "BONG DLR-10 + dynamics": Method(bong, DYNAMICS),
    "BONG diag + dynamics": Method(bong_diag, DYNAMICS),
    "SGDClassifier": Method(sgd, {"eta0": (1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3)}),
    "MLPClassifier(50) Adam": Method(mlp, {"learning_rate_init": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)}),
}
QUICK = {"sigma0": 0.3, "process_noise": 1e-4, "dynamics_decay": 1.0, "eta0": 0.03, "learning_rate_init": 1e-3}


def make_stream(half, seed: int, n_tasks: int = TASKS) -> TaskStream:
    X, y = half
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    train_pool, test_pool = order[:-TEST_POOL], order[-TEST_POOL:]
    train = rng.choice(train_pool, size=(n_tasks, TASK_ROWS), replace=False)
    Xs, ys, tests = [], [], []
    for k in range(n_tasks):
        perm = rng.permutation(X.shape[1])
        test = rng.choice(test_pool, size=TEST_ROWS, replace=False)
        Xs.append(X[train[k]][:, perm])
        ys.append(y[train[k]])
        tests.append((X[test][:, perm], y[test]))
    return TaskStream(np.concatenate(Xs), np.concatenate(ys), TASK_ROWS, tests)


PROTOCOL = (
    "Data: the MNIST **test set** (10,000 images; the paper used Fashion-MNIST, whose 60,000 training images are "
    "not available here) pooled 2x2 to 14x14 and scaled to [0, 1], cut once into a report half and a tune half "
    "of 5,000 rows. Stream: {n_tasks} tasks x {task_rows} rows of the report half; each task permutes the 196 "
    f"pixels by its own random permutation; training rows are distinct across tasks (from a {5000 - TEST_POOL}-row "
    f"training pool), and each task has {TEST_ROWS} held-out test rows (from a {TEST_POOL}-row test pool, permuted "
    "like the task), never trained on. The learners are not told where tasks begin."
)

PAPER = (
    "**What the paper found** (permuted Fashion-MNIST, MLP 784-500-500-10, 10 tasks x 300 rows, 500 test rows "
    "per task, current-task test error, 20 trials; Sec. 4.1, Fig. 1c, Fig. 13, Fig. 14): LO-FI adapts to each "
    "new task fastest and has the lowest current-task error throughout, ahead of replay-SGD, replay-Adam, the "
    "diagonal EKFs and online gradient descent; in NLL the gap is larger; the gain from the rank levels off "
    "near 10. Fig. 15 adds that LO-FI 'is fairly good at remembering the past' tasks while staying uncertain "
    "on inputs it never saw."
)

#: Reading of the committed run (written after it; the lines above it in the report are computed).
NOTES = """**Reading** (written after the run; the numbers are the table's).

- *Does skbong reproduce the paper?* Qualitatively, yes. LO-FI (BONG DLR-10) adapts to each new permutation
  fastest: current-task accuracy averaged over the stream 0.658 (with dynamics) against 0.591 for the best
  scikit-learn learner, and the current-task NLL is lower by 0.18 nats (the paper: the gap is larger in NLL than in
  error). It also keeps more of the past: all-seen accuracy at the end 0.556 against 0.520, task 1 at the end
  0.43 against 0.37-0.39. The diagonal family (VD-EKF) sits between LO-FI and the scikit-learn learners, as the
  paper's diagonal EKFs do. The gap is smaller than in the paper's Fig. 1c: our baselines are tuned SGD and Adam on
  the same one-update-per-row budget, the images are 14x14 MNIST and the network has 50 hidden units, not 2x500.
- *The dynamics.* Tuned for the all-seen accuracy, the grid picked the smallest process noise (q = 1e-6):
  essentially static weights. Process noise buys faster adaptation at the price of memory: on the validation stream
  q = 1e-4 (sigma0 = 0.3) reached 0.724 current-task accuracy against 0.678, but 0.570 all-seen against 0.642. The
  paper tuned on the one-step-ahead (current-task) loss, which favours the larger q. `dynamics_decay = 0.9999`
  helped in one pair of candidates of 24 (diag, sigma0 = 1, q = 1e-4). sigma0 = 1 runs for both families but is
  worse than 0.3 (best all-seen 0.53-0.55 against 0.58-0.64); before the estimator's line search on the mean step became
  the default (the run of 2026-11-25) it diverged or failed.
- *Where skbong loses:* time. For the same rows BONG DLR-10 trains about nine times slower than SGDClassifier and
  about three times slower than MLPClassifier (the training-s columns); the diagonal family costs about an eighth
  of LO-FI, and process noise makes a LO-FI step about 20% dearer than a static one."""

BENCH = TaskBenchmark(
    name="permuted_mnist",
    title="Permuted MNIST: a new pixel permutation every 300 rows (LO-FI Sec. 4.1)",
    make_stream=make_stream,
    n_tasks=TASKS,
    task_names=[f"task {k + 1}" for k in range(TASKS)],
    methods=METHODS,
    quick_grid=QUICK,
    protocol=PROTOCOL,
    paper=PAPER,
    notes=NOTES,
)

if __name__ == "__main__":
    task_benchmark(BENCH, __doc__)
