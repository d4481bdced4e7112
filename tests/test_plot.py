"""ssmts.plot and ssmts.nn.analysis: the figures, and the frequency-domain numbers they show.

The transfer-function values are checked against computations that do not share code
with ssmts.nn.analysis: a dense C (iwI - A)^-1 B + D, the DTFT of the layer's own
kernel (SSM.kernel), and the DTFT of the layer's output for an impulse (SSM.forward).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer  # noqa: E402

from ssmts import SSMRegressor, SSMTransformer  # noqa: E402
from ssmts import plot as ssmplot  # noqa: E402
from ssmts.nn import SSM, SSMBackbone  # noqa: E402
from ssmts.nn.analysis import frequency_response, transfer_function  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def random_stable_system(N=6, H=3, M=2, seed=0):
    """Dense real (A, B, C, D) with eigenvalues in Re < -0.3, complex pairs included."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((N, N))
    A -= (np.linalg.eigvals(A).real.max() + 0.3) * np.eye(N)
    assert np.any(np.abs(np.linalg.eigvals(A).imag) > 1e-3), "want complex eigenvalues in the test system"
    return A, rng.standard_normal((N, H)), rng.standard_normal((M, N)), rng.standard_normal((M, H))


def dense_transfer(A, B, C, D, omegas):
    N = A.shape[0]
    return np.stack([C @ np.linalg.solve(1j * w * np.eye(N) - A, B) + D for w in omegas], axis=-1)


def dtft(kernel: np.ndarray, theta: np.ndarray, lags: np.ndarray) -> np.ndarray:
    """sum_l kernel[..., l] e^{-i theta l}: (..., L) -> (..., n)."""
    return np.einsum("...l,nl->...n", kernel, np.exp(-1j * np.outer(theta, lags)))


# ---------------------------------------------------------------- transfer function values
@pytest.mark.parametrize("with_D", [True, False])
def test_transfer_function_matches_dense_system(with_D):
    A, B, C, D = random_stable_system()
    layer = SSM.from_matrices(A, B, C, D if with_D else None, dt=0.01)
    omegas = np.concatenate([-np.logspace(-2, 2, 9), [0.0], np.logspace(-2, 2, 9)])
    G = transfer_function(layer, omegas)
    expected = dense_transfer(A, B, C, D if with_D else np.zeros_like(D), omegas)
    assert G.shape == (2, 3, len(omegas))
    np.testing.assert_allclose(G, expected, rtol=1e-9, atol=1e-9)
    without_D = transfer_function(layer, omegas, include_feedthrough=False)
    np.testing.assert_allclose(without_D, dense_transfer(A, B, C, np.zeros_like(D), omegas), rtol=1e-9, atol=1e-9)


def test_transfer_function_of_conj_sym_layer_counts_conjugate_modes_at_minus_omega():
    """A conj_sym layer is the real system with modes Lambda and conj(Lambda)."""
    torch.manual_seed(0)
    layer = SSM(3, 8, d_output=2, D="full", init="lin").double()
    with torch.no_grad():
        layer.Lambda_re_raw.normal_(0.0, 0.5)
    Lambda = layer.Lambda.detach().numpy()[0]
    B = torch.view_as_complex(layer.B.detach())[0].numpy()
    C = torch.view_as_complex(layer.C.detach())[0].numpy()
    D = layer.D.detach().numpy()
    A_full = np.diag(np.concatenate([Lambda, Lambda.conj()]))
    B_full = np.concatenate([B, B.conj()], axis=0)
    C_full = np.concatenate([C, C.conj()], axis=1)
    omegas = np.linspace(-4.0, 4.0, 17)
    expected = dense_transfer(A_full, B_full, C_full, D, omegas)
    assert np.abs(expected.imag).max() > 1e-3  # a genuinely complex response
    G = transfer_function(layer, omegas)
    np.testing.assert_allclose(G, expected, rtol=1e-10, atol=1e-10)
    # The tempting shortcut 2 Re(C (iwI - Lambda)^-1 B) + D is a different (real) function.
    naive = 2 * np.einsum("mp,ph,pn->mhn", C, B, 1 / (1j * omegas[None] - Lambda[:, None])).real + D[..., None]
    assert np.abs(naive - expected).max() > 1e-2


@pytest.mark.parametrize("dt", [1e-2, 1e-3])
def test_small_step_kernel_dtft_approaches_continuous_transfer_function(dt):
    """sum_l K_l e^{-i w dt l} -> G(i w) as dt -> 0 (ZOH: K_l ~ dt h(l dt))."""
    A, B, C, D = random_stable_system()
    layer = SSM.from_matrices(A, B, C, dt=dt)
    decay = -np.linalg.eigvals(A).real.max()  # the slowest mode sets the length
    length = int(40 / (decay * dt))  # e^-40: the truncated tail is negligible
    with torch.no_grad():
        K = layer.kernel(length).numpy()
    omegas = np.array([0.0, 0.3, 1.0, 3.0])
    approximation = dtft(K, omegas * dt, np.arange(length))
    G = transfer_function(layer, omegas)
    relative_error = np.abs(approximation - G).max() / np.abs(G).max()
    # The ZOH error is first order in dt: measured 0.386 * dt for dt = 1e-2, 1e-3 and 1e-4.
    assert 0.1 * dt < relative_error < 1.0 * dt


def test_frequency_response_is_the_dtft_of_the_kernel():
    torch.manual_seed(1)
    layer = SSM(3, 8, d_output=3, heads=1, dt_min=0.05, dt_max=0.2, discretization="bilinear").double()
    length = 4000
    with torch.no_grad():
        K = layer.kernel(length).numpy()
    theta = np.linspace(0.0, np.pi, 9)
    expected = dtft(K, theta, np.arange(length))
    H = frequency_response(layer, theta, include_feedthrough=False)
    np.testing.assert_allclose(H, expected, rtol=1e-8, atol=1e-8)
    # Frequencies in Hz are converted with theta = 2 pi f / rate.
    in_hz = frequency_response(layer, theta * 50.0 / (2 * np.pi), sample_rate=50.0, include_feedthrough=False)
    np.testing.assert_allclose(in_hz, H, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "options",
    [
        dict(heads=2),  # block-diagonal heads plus the mixer
        dict(heads=1, bidirectional="essm"),
        dict(heads=2, bidirectional="ldnn"),
        dict(heads=1, D="identity"),
    ],
    ids=["heads-mixer", "essm", "ldnn", "identity-D"],
)
def test_frequency_response_matches_the_layer_output_for_an_impulse(options):
    """The response of layer.forward to a unit impulse, Fourier transformed, per input channel."""
    torch.manual_seed(2)
    H = 4
    layer = SSM(H, 8, dt_min=0.05, dt_max=0.1, **options).double()
    if options.get("bidirectional") == "ldnn":
        with torch.no_grad():
            layer.Lambda_backward_im.add_(0.7)  # make the backward system differ from the forward one
    length, centre = 2001, 1000
    theta = np.linspace(0.0, np.pi, 7)
    bias = layer.mixer.bias.detach().numpy()[:, None] if layer.mixer is not None else 0.0
    columns = []
    for h in range(H):
        impulse = torch.zeros(1, H, length, dtype=torch.float64)
        impulse[0, h, centre] = 1.0
        with torch.no_grad():
            y = layer(impulse)[0].numpy() - bias
        columns.append(dtft(y, theta, np.arange(length) - centre))
    measured = np.stack(columns, axis=1)
    np.testing.assert_allclose(frequency_response(layer, theta), measured, rtol=1e-7, atol=1e-7)
    if options.get("bidirectional") == "essm":
        assert np.abs(frequency_response(layer, theta).imag).max() < 1e-10  # symmetric kernel: zero phase


def test_analysis_rejects_bad_input():
    layer = SSM(2, 4)
    with pytest.raises(TypeError, match="SSM layer"):
        transfer_function(SSMBackbone(1, 2, 1, d_state=4), [1.0])
    with pytest.raises(ValueError, match="one-dimensional"):
        transfer_function(layer, np.ones((2, 2)))
    with pytest.raises(ValueError, match="finite"):
        frequency_response(layer, [np.nan])
    with pytest.raises(ValueError, match="sample_rate"):
        frequency_response(layer, [1.0], sample_rate=0.0)


# ---------------------------------------------------------------- figures
@pytest.fixture(scope="module")
def fitted():
    """A tiny fitted regressor (2 layers, 2 heads, validation split) and its initialization."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((24, 2, 40))
    y = X[:, 0].mean(axis=1)
    params = dict(d_model=4, d_state=4, n_layers=2, heads=2, random_state=0)
    estimator = SSMRegressor(**params, max_epochs=3, early_stopping=True, validation_fraction=0.25).fit(X, y)
    # Same seed, no training: the layers the regressor started from.
    initial = SSMTransformer(**params, objective="none").fit(X)
    return estimator, initial, X, y


def test_initial_model_of_the_same_seed_is_the_regressor_at_initialization(fitted):
    """What the notebooks rely on for the black 'initialization' dots."""
    estimator, initial, _, _ = fitted
    fresh = SSMRegressor(
        **{k: estimator.get_params()[k] for k in ("d_model", "d_state", "n_layers", "heads", "random_state")},
        max_epochs=1,
        lr=1e-30,
        lr_ssm=1e-30,
        weight_decay=0.0,
    )
    X, y = fitted[2], fitted[3]
    fresh.fit(X, y)  # steps of 1e-30 leave float32 parameters at their initial values
    for a, b in zip(ssmplot.ssm_layers_of(fresh), ssmplot.ssm_layers_of(initial)):
        torch.testing.assert_close(a.Lambda, b.Lambda)
        torch.testing.assert_close(a.Delta, b.Delta)


def test_plot_eigenvalues(fitted):
    estimator, initial, _, _ = fitted
    fig = ssmplot.plot_eigenvalues(estimator, initial=initial)
    assert isinstance(fig, Figure)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["layer 1", "layer 2"]
    layers = ssmplot.ssm_layers_of(estimator)
    for ax, layer in zip(axes, layers):
        collections = ax.collections
        assert len(collections) == 1 + layer.heads  # initialization + one scatter per head
        learned = np.concatenate([c.get_offsets() for c in collections[1:]])
        Lambda = layer.Lambda.detach().numpy().ravel()
        np.testing.assert_allclose(learned[:, 0], Lambda.real, rtol=1e-6)
        np.testing.assert_allclose(learned[:, 1], np.arcsinh(Lambda.imag), rtol=1e-6)
        assert ax.get_xlabel() == "Re λ" and ax.get_ylabel() == "arcsinh(Im λ)"
    labels = axes[-1].get_legend_handles_labels()[1]
    assert {"initialization", "head 1", "head 2"} <= set(labels)


def test_plot_eigenvalues_of_one_layer_with_conjugates_into_given_axes():
    layer = SSM(2, 8)
    fig, ax = plt.subplots()
    returned = ssmplot.plot_eigenvalues(layer, include_conjugates=True, ax=ax)
    assert returned is fig
    points = ax.collections[0].get_offsets()
    assert len(points) == 8  # 4 stored modes and their conjugates
    np.testing.assert_allclose(np.sort(points[:, 1]), np.sort(-points[:, 1]))


def test_plot_step_sizes(fitted):
    estimator, initial, _, _ = fitted
    fig = ssmplot.plot_step_sizes(estimator, initial=initial)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["layer 1", "layer 2"]
    assert len(ax.collections) == 4  # learned + initialization per layer
    layers = ssmplot.ssm_layers_of(estimator)
    learned_layer_2 = ax.collections[2].get_offsets()[:, 0]
    np.testing.assert_allclose(
        np.sort(learned_layer_2), np.sort(np.log(layers[1].Delta.detach().numpy().ravel())), rtol=1e-6
    )
    assert len(ax.lines) == 2  # ln dt_min and ln dt_max
    np.testing.assert_allclose(sorted(line.get_xdata()[0] for line in ax.lines), np.log([1e-3, 1e-1]))


def test_plot_kernels(fitted):
    estimator, _, _, _ = fitted
    fig = ssmplot.plot_kernels(estimator.model_, length=30, pairs=[(0, 0), (1, 0), (3, 2)], sample_rate=10.0)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    layer = ssmplot.ssm_layers_of(estimator)[1]
    lines = fig.axes[1].lines[:3]
    assert [line.get_label() for line in lines] == ["K[0, 0]", "K[1, 0]", "K[3, 2]"]
    with torch.no_grad():
        np.testing.assert_allclose(lines[2].get_ydata(), layer.kernel(30)[3, 2].numpy(), rtol=1e-6)
    np.testing.assert_allclose(lines[0].get_xdata(), np.arange(30) / 10.0)
    assert fig.axes[0].get_xlabel() == "lag (s)"
    with pytest.raises(ValueError, match="out of range"):
        ssmplot.plot_kernels(layer, pairs=[(4, 0)])


def test_plot_transfer_function_entries_and_singular_values():
    A, B, C, D = random_stable_system()
    layer = SSM.from_matrices(A, B, C, D, dt=0.01)
    omegas = np.logspace(-1, 1, 25)
    fig = ssmplot.plot_transfer_function(layer, omegas)
    (ax,) = fig.axes
    assert len(ax.lines) == 6  # M * H = 2 * 3 entries
    np.testing.assert_allclose(ax.lines[5].get_ydata(), np.abs(dense_transfer(A, B, C, D, omegas)[1, 2]), rtol=1e-9)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"

    fig = ssmplot.plot_transfer_function(layer, omegas, mode="singular_values", decibels=True)
    (ax,) = fig.axes
    assert len(ax.lines) == 2  # min(M, H) singular values
    sigma_max = np.linalg.svd(np.moveaxis(dense_transfer(A, B, C, D, omegas), -1, 0), compute_uv=False)[:, 0]
    np.testing.assert_allclose(ax.lines[-1].get_ydata(), 20 * np.log10(sigma_max), rtol=1e-9)
    assert ax.get_ylabel() == "gain (dB)"


def test_plot_transfer_function_discrete_in_hz_of_a_fitted_model(fitted):
    estimator, _, _, _ = fitted
    fig = ssmplot.plot_transfer_function(estimator, layer_index=1, discrete=True, sample_rate=125.0)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "frequency (Hz)"
    assert ax.get_title().endswith("layer 2")
    assert ax.lines[0].get_xdata().max() == pytest.approx(62.5)
    assert len(ax.lines) == 16  # 4 x 4 layer: every entry
    with pytest.raises(IndexError):
        ssmplot.plot_transfer_function(estimator, layer_index=2)
    with pytest.raises(ValueError, match="discrete=True"):
        ssmplot.plot_transfer_function(estimator, sample_rate=125.0)


def test_plot_history_of_estimator_and_of_a_plain_history(fitted):
    estimator, _, _, _ = fitted
    fig = ssmplot.plot_history(estimator)
    loss_ax, score_ax = fig.axes
    assert [line.get_label() for line in loss_ax.lines] == ["training loss", "validation loss"]
    np.testing.assert_allclose(loss_ax.lines[0].get_ydata(), [r["train_loss"] for r in estimator.history_])
    assert score_ax.get_ylabel() == "validation −MSE (standardized)"

    history = [{"epoch": 1, "train_loss": 2.0}, {"epoch": 2, "train_loss": 1.0}]
    fig = ssmplot.plot_history(history)
    assert len(fig.axes) == 1 and len(fig.axes[0].lines) == 1

    fig, ax = plt.subplots()
    assert ssmplot.plot_history(estimator, ax=ax) is fig
    assert len(fig.axes) == 2  # the score went to a twin y-axis


def test_plot_history_marks_the_epoch_whose_weights_were_kept():
    """Early stopping keeps a later epoch only if it is better by more than tol: the highest point of the
    curve is not always the kept one, and the plot marks the one best_epoch_ names (a bare history, its
    highest point)."""
    history = [{"epoch": e, "train_loss": 1.0 / e, "val_score": s} for e, s in enumerate([0.5, 0.8, 0.80001, 0.7], 1)]
    estimator = SSMRegressor()
    estimator.history_, estimator.best_epoch_ = history, 2  # epoch 3 is higher by less than tol
    marked = [c for c in ssmplot.plot_history(estimator).axes[1].collections]
    assert [tuple(c.get_offsets()[0]) for c in marked] == [(2.0, 0.8)]
    assert marked[0].get_label() == "kept (epoch 2): 0.8"
    bare = ssmplot.plot_history(history).axes[1].collections
    assert [tuple(c.get_offsets()[0]) for c in bare] == [(3.0, 0.80001)] and bare[0].get_label().startswith("best")
    estimator.best_epoch_ = 0  # the starting weights (the feature estimators' training that did not help)
    score_ax = ssmplot.plot_history(estimator).axes[1]
    legend = [text.get_text() for text in score_ax.get_legend().texts]
    assert not score_ax.collections and "kept: the starting weights" in legend


def test_estimators_inside_pipelines_are_found(fitted):
    estimator, _, X, _ = fitted
    pipeline = Pipeline([("identity", FunctionTransformer()), ("ssm", estimator)])
    assert ssmplot.ssm_layers_of(pipeline) == ssmplot.ssm_layers_of(estimator)
    assert len(ssmplot.plot_history(pipeline).axes) == 2


def test_unfitted_and_wrong_inputs_give_clear_errors(fitted):
    _, initial, _, _ = fitted
    for function in (
        ssmplot.plot_eigenvalues,
        ssmplot.plot_step_sizes,
        ssmplot.plot_kernels,
        ssmplot.plot_transfer_function,
        ssmplot.plot_history,
    ):
        with pytest.raises(NotFittedError, match="call fit"):
            function(SSMRegressor())
    with pytest.raises(NotFittedError, match="SSMRegressor"):
        ssmplot.plot_eigenvalues(Pipeline([("ssm", SSMRegressor())]))
    with pytest.raises(TypeError, match="fitted ssmts estimator"):
        ssmplot.plot_eigenvalues("not a model")
    with pytest.raises(TypeError, match="no ssmts.nn.SSM layer"):
        ssmplot.plot_kernels(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="initial has 2 SSM layers but the model has 3"):
        ssmplot.plot_eigenvalues(SSMBackbone(2, 4, 3, d_state=4, heads=2), initial=initial)
    with pytest.raises(ValueError, match="empty"):
        ssmplot.plot_history([])


def test_plot_arguments_are_named_in_the_plots_words(fitted):
    """plot_transfer_function's frequencies were refused as 'omegas' (the analysis's name), an empty list
    drew an empty figure, and plot_kernels(sample_rate='x') raised a raw comparison TypeError."""
    estimator = fitted[0]
    for frequencies, message in [
        (np.ones((3, 3)), r"frequencies must be a non-empty 1-D sequence, got shape \(3, 3\)"),
        ([], r"frequencies must be a non-empty 1-D sequence, got shape \(0,\)"),
        ([1.0, np.nan], "frequencies must be finite"),
    ]:
        with pytest.raises(ValueError, match=message):
            ssmplot.plot_transfer_function(estimator, frequencies=frequencies)
    for rate in ("x", -1.0, True):
        with pytest.raises(ValueError, match="sample_rate must be a number > 0"):
            ssmplot.plot_kernels(estimator, sample_rate=rate)


def test_a_feature_estimator_is_named_as_having_no_layers_to_draw():
    """The layer plots on SSMFeatureClassifier said 'the FeatureReadout module contains no ssmts.nn.SSM
    layer', an internal class's name."""
    from ssmts import SSMFeatureClassifier

    X = np.random.default_rng(0).standard_normal((12, 30))
    features = SSMFeatureClassifier(n_scales=2, n_kernels=8, random_state=0).fit(X, np.arange(12) % 2)
    for function in (ssmplot.plot_kernels, ssmplot.plot_eigenvalues, ssmplot.plot_transfer_function):
        with pytest.raises(TypeError, match="SSMFeatureClassifier's network has no trained ssmts.nn.SSM layer"):
            function(features)


def test_sktime_estimators_are_accepted():
    sktime_estimators = pytest.importorskip("ssmts.sktime")
    rng = np.random.default_rng(1)
    X = rng.standard_normal((12, 1, 20))
    y = np.array(["a", "b"] * 6)
    classifier = sktime_estimators.SSMPanelClassifier(
        d_model=4, d_state=4, n_layers=1, max_epochs=2, min_steps=0, random_state=0
    )
    with pytest.raises(NotFittedError):
        ssmplot.plot_eigenvalues(classifier)
    classifier.fit(X, y)
    assert ssmplot.ssm_layers_of(classifier) == ssmplot.ssm_layers_of(classifier.estimator_)
    assert isinstance(ssmplot.plot_history(classifier), Figure)


# ---------------------------------------------------------------- sensitive frequencies (PTD)
def test_plot_sensitive_frequencies_marks_the_spikes_of_two_inits():
    from ssmts.nn.analysis import sensitive_frequencies

    omegas = np.linspace(0.0, 100.0, 2001)
    legs = SSM(1, 16, init="legs", D="none", conj_sym=False)
    ptd = SSM(1, 16, init="ptd", D="none", conj_sym=False)
    fig = ssmplot.plot_sensitive_frequencies(legs, omegas, n_peaks=3, label="legs")
    ax = fig.axes[0]
    modes = sensitive_frequencies(ptd, 3, omegas=omegas)[0]
    ssmplot.plot_sensitive_frequencies(modes, label="ptd", ax=ax)
    assert isinstance(fig, Figure) and ax.get_yscale() == "log"
    assert len(ax.lines) == 4 and len(ax.collections) == 2  # gap + reference per init, spikes as points
    np.testing.assert_allclose(ax.collections[1].get_offsets()[:, 0], modes.peak_omegas)
    assert any("rad/sample" in text.get_text() for text in ax.get_legend().get_texts())
    with pytest.raises(ValueError, match="layer_index"):
        ssmplot.plot_sensitive_frequencies(legs, omegas, layer_index=3)


def test_plot_sensitive_frequencies_numbers_the_layer_as_the_other_plots_do(fitted):
    """Layers counted from 1 (the kernels' panels say "layer 1", "layer 2"); the second layer's curve was
    called "layer 0", and layer_index=-1 was refused."""
    estimator = fitted[0]
    omegas = np.linspace(0.0, 50.0, 401)

    def names(**kwargs):
        legend = ssmplot.plot_sensitive_frequencies(estimator, omegas, n_peaks=2, **kwargs).axes[0].get_legend()
        return {text.get_text().split(":")[0] for text in legend.get_texts() if "gap to reference" in text.get_text()}

    assert names(layer_index=0) == {"layer 1"} and names(layer_index=1) == names(layer_index=-1) == {"layer 2"}
