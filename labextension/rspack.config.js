// Merged into @jupyter/builder's configuration (package.json "jupyterlab.rspackConfig").
// Module ids named after paths relative to this folder, not hashes of absolute ones
// (the exposed module's path is absolute): the bundle is then the same wherever it is
// built, and tests/test_labextension.py can check the committed one byte for byte.
// Symlinks are not followed, so a check that builds beside a link to this folder's
// node_modules (the test does, offline) names modules as a build here does.
module.exports = {
  optimization: { moduleIds: 'named', chunkIds: 'deterministic' },
  resolve: { symlinks: false }
};
