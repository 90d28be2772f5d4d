/* Sphinx 9's Chinese search data ends with `window.Stemmer = ChineseStemmer`, but
 * ships only the English stemmer, so search stops with a ReferenceError. Chinese
 * words need no stemming; the Latin words in Chinese pages use the English stemmer,
 * as Sphinx's Python side (sphinx.search.zh) does when it builds the index. Loaded
 * before language_data.js; EnglishStemmer is looked up only when a search runs. */
window.ChineseStemmer = function () {
  const english = new EnglishStemmer();
  this.stemWord = (word) => english.stemWord(word);
};
